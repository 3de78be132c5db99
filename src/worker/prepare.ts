// Everything an attempt does before its CLI starts: the checks a job cannot pass by itself (attempt
// limit, workspace roots, the cwd itself, env overlay, workspace trust), the run's env and scrubbers,
// which CLI session to resume (the latest snapshot's unless the cwd changed: resume.ts) or the
// transcript to replay, attempt.started, and for a
// supervised turn its hook wiring. A check that fails ends the attempt with turn.failed.
import { prepareSupervisedRun, type DecisionHub, type SupervisedRun } from "../decisions/index.ts";
import type { EnvOverlay, ToolSandbox } from "../cli/index.ts";
import { isFailureKind, type AttemptStartedData, type FailureKind } from "../events/index.ts";
import type { EventLog } from "../log/index.ts";
import { cwdProblem, type TurnJob } from "../queue/index.ts";
import type { Scrubber } from "../telemetry/index.ts";
import type { AttemptEvents } from "./attempt-events.ts";
import { jobOptionsRefusal } from "./job-options.ts";
import { rebuildTranscript } from "./log-scan.ts";
import { planResume, REPLAY_PLAN, resumedCostBase, type ResumePlan } from "./resume.ts";
import { toolSandboxFor } from "./tool-sandbox.ts";
import { resolveEnv, runScrubbers, type RunEnv } from "./run-env.ts";
import { runTurnOptions } from "./run-cli.ts";
import type { WarmUse } from "./warm.ts";
import type { Snapshot } from "./snapshots.ts";
import type { AttemptControl, AttemptEnd, ExecuteDeps, Replay } from "./types.ts";
import { BadCwdError, underRoots, WorkspaceNotAllowedError } from "./workspace.ts";

// attempt.started waits this long at most for the CLI's first line to share its append: one round
// trip fewer per turn, and live followers see the attempt start when its first output does. A worker
// that dies meanwhile leaves no attempt.started; the next attempt still records it abandoned
// (danglingAttempts goes by attempt numbers, not by starts).
const ATTEMPT_HOLD_MS = 1500;

/** What the run step needs from the preparation. */
export interface PreparedRun {
  /** The job's env overlay, resolved. */
  env: Record<string, string>;
  /** The run's model access through the gateway (laid over `env`); undefined in passthrough. */
  modelEnv?: EnvOverlay | undefined;
  /** Scrubs raw `cli.line` text and the session file; undefined when the worker keeps them raw. */
  lines: Scrubber | undefined;
  prompt: string;
  /** The CLI session to resume. */
  resume: string | undefined;
  /** The snapshot this run restores (its file is restored when `resume` is its session). */
  snapshot: Snapshot | undefined;
  /** Where the resumed CLI session's running total stands as this run starts: its results count from it (resume.ts). */
  costBaseUsd: number | undefined;
  /** Set when the session had a CLI session this run does not continue, and why. */
  fresh: ResumePlan["fresh"];
  /** Turns whose transcript a replay carries. */
  replayedTurns: number;
  supervised: SupervisedRun | undefined;
  /** The tool sandbox of a turn whose workspace is not trusted (undefined: unsandboxed). */
  toolSandbox: ToolSandbox | undefined;
}

export type Preparation = { run: PreparedRun } | { end: AttemptEnd };

export async function prepareAttempt(
  deps: ExecuteDeps,
  job: TurnJob,
  ctl: AttemptControl,
  events: AttemptEvents,
  snapshotRead: Promise<Snapshot | undefined>,
  replay: Replay | undefined,
): Promise<Preparation> {
  const refused = refusal(deps, job, events.attempt);
  if (refused !== undefined) return { end: await events.fail(refused.errorKind, refused.name, refused.message) };
  let runEnv: RunEnv;
  try {
    runEnv = resolveEnv(job, deps.settings);
  } catch (err) {
    return { end: await events.fail("bad_payload", "BadPayload", (err as Error).message) };
  }
  const scrubbers = runScrubbers(deps, runEnv);
  events.useScrubber(scrubbers.scrubber);
  const plan = replay === undefined ? await planResume(deps.log, job, await snapshotRead) : REPLAY_PLAN;
  const { prompt, replayedTurns } =
    replay === undefined ? { prompt: job.prompt, replayedTurns: 0 } : await replayPrompt(deps.log, job);
  const sandboxing = toolSandboxFor(job, deps.settings.toolSandbox);
  const toolSandbox = "sandbox" in sandboxing ? sandboxing.sandbox : undefined;
  const access = await openAccess(deps, job, ctl, events, runEnv);
  if ("end" in access) return access;
  const run: PreparedRun = {
    env: runEnv.env,
    modelEnv: access.env,
    lines: scrubbers.lines,
    prompt,
    ...plan,
    costBaseUsd: undefined,
    replayedTurns,
    supervised: undefined,
    toolSandbox,
  };
  ctl.warm = warmUse(deps, job, ctl, events, run);
  if (ctl.access !== undefined) ctl.access = await deps.access!.forNewProcess(ctl.access, ctl.warm, runEnv.env);
  run.costBaseUsd = await resumedCostBase(deps.log, job.session, plan, ctl.warm?.label === "warm");
  await writeAttemptStarted(deps, job, events, run, ctl.warm);
  if (ctl.reason !== undefined) return { end: await events.stopped() };
  if (job.options.trustWorkspace === true && deps.settings.workspaceTrust !== "job") {
    const why =
      "the turn asks to trust its workspace, which this worker does not allow; set TURNSTREAM_WORKSPACE_TRUST=job on the worker, or drop trustWorkspace";
    return { end: await events.fail("bad_options", "WorkspaceTrustRefused", why) };
  }
  if ("refused" in sandboxing)
    return {
      end: await events.fail(sandboxing.refused.errorKind, sandboxing.refused.name, sandboxing.refused.message),
    };
  const optionsRefused = jobOptionsRefusal(job, deps.settings);
  if (optionsRefused !== undefined)
    return { end: await events.fail("bad_options", optionsRefused.name, optionsRefused.message) };
  const supervision = job.options.supervised === true ? await supervise(deps, job, events) : undefined;
  if (supervision !== undefined && "failed" in supervision)
    return { end: await events.fail("bad_options", "SupervisedUnavailable", supervision.failed) };
  // The warm path may have moved the run to a new process, and so to a new token.
  return { run: { ...run, modelEnv: ctl.access?.env, supervised: supervision?.run } };
}

/** The run's token at the worker's gateway (none in passthrough); a worker with no credential fails the turn. */
async function openAccess(
  deps: ExecuteDeps,
  job: TurnJob,
  ctl: AttemptControl,
  events: AttemptEvents,
  runEnv: RunEnv,
): Promise<{ env: EnvOverlay | undefined } | { end: AttemptEnd }> {
  if (deps.access === undefined) return { env: undefined };
  try {
    // A turn that runs warm keeps its session's token while its process is kept.
    ctl.access = await deps.access.open(job, events, runEnv.env, deps.warm.viaProcess(job));
    return { env: ctl.access.env };
  } catch (err) {
    const e = err as Error & { kind?: string };
    // NoAuthError says `auth`; anything else is the gateway's own failure (it could not listen).
    const kind = e.kind !== undefined && isFailureKind(e.kind) ? e.kind : "gateway";
    return { end: await events.fail(kind, e.name, e.message) };
  }
}

/** Why the turn cannot run on this worker at all, before anything is resolved. */
function refusal(
  deps: ExecuteDeps,
  job: TurnJob,
  attempt: number,
): { errorKind: FailureKind; name: string; message: string } | undefined {
  const { retry, workspaceRoots } = deps.settings;
  if (attempt > retry.maxAttempts) {
    return {
      errorKind: "too_many_attempts",
      name: "TooManyAttempts",
      message: `the turn had ${attempt - 1} attempts (limit ${retry.maxAttempts})`,
    };
  }
  if (!underRoots(job.cwd, workspaceRoots)) {
    const e = new WorkspaceNotAllowedError(workspaceRoots);
    return { errorKind: e.kind, name: e.name, message: e.message };
  }
  const problem = cwdProblem(job.cwd);
  if (problem !== undefined) {
    const e = new BadCwdError(job.cwd, problem, deps.settings.workerId);
    return { errorKind: e.kind, name: e.name, message: e.message };
  }
  return undefined;
}

/** The prompt of a run whose CLI session was lost: the session so far as a transcript from the log, then the turn's own prompt. */
async function replayPrompt(log: EventLog, job: TurnJob): Promise<{ prompt: string; replayedTurns: number }> {
  const t = await rebuildTranscript(log, job.session, job.turn);
  const prompt =
    `The earlier part of this conversation could not be restored, so here it is as a transcript:\n\n` +
    `<transcript>\n${t.text}\n</transcript>\n\nContinue from there. The user's new message:\n\n${job.prompt}`;
  return { prompt, replayedTurns: t.turns };
}

/** The attempt's warm decision, taken with the options the run will start with (supervision adds nothing a warm turn keeps). */
function warmUse(
  deps: ExecuteDeps,
  job: TurnJob,
  ctl: AttemptControl,
  events: AttemptEvents,
  run: PreparedRun,
): WarmUse | undefined {
  if (!deps.warm.wants(job)) {
    deps.warm.drop(job.session);
    return undefined;
  }
  return deps.warm.choose(job, runTurnOptions(deps, job, ctl, events, run), events.lastSnapshot);
}

async function writeAttemptStarted(
  deps: ExecuteDeps,
  job: TurnJob,
  events: AttemptEvents,
  run: PreparedRun,
  warm: WarmUse | undefined,
): Promise<void> {
  const started: AttemptStartedData = { worker: deps.settings.workerId, attempt: events.attempt, cwd: job.cwd };
  if (job.options.model !== undefined) started.model = job.options.model;
  const cliVersion = await deps.cliVersion();
  if (cliVersion !== undefined) started.cliVersion = cliVersion;
  if (run.resume !== undefined) started.resume = run.resume;
  if (run.snapshot !== undefined) started.snapshotSeq = run.snapshot.seq;
  if (run.costBaseUsd !== undefined) started.costBaseUsd = run.costBaseUsd;
  if (run.fresh !== undefined) started.freshReason = run.fresh.reason;
  if (job.traceparent !== undefined) started.traceparent = job.traceparent;
  if (events.trace !== undefined) started.trace = events.trace;
  if (warm !== undefined) started.warm = warm.label;
  await events.write("attempt.started", started, { wait: { holdMs: ATTEMPT_HOLD_MS } });
}

/** A supervised turn's hook wiring, or why it cannot be supervised here (then it must not start). */
async function supervise(
  deps: ExecuteDeps,
  job: TurnJob,
  events: AttemptEvents,
): Promise<{ run: SupervisedRun } | { failed: string }> {
  if (deps.decisionHub === undefined) return { failed: "this worker has no decision hub for supervised turns" };
  let hub: DecisionHub;
  try {
    hub = await deps.decisionHub();
  } catch (err) {
    // e.g. no operator keys: no decision could be verified.
    return { failed: (err as Error).message };
  }
  const o = job.options;
  const run = prepareSupervisedRun(hub, {
    session: job.session,
    turn: job.turn,
    attempt: events.attempt,
    epoch: events.epoch,
    cwd: job.cwd,
    logger: deps.logger,
    riskyTools: o.riskyTools,
    unsupervisedTools: o.unsupervisedTools,
  });
  return { run };
}
