// Everything an attempt does before its CLI starts: the checks a job cannot pass by itself (attempt
// limit, workspace roots, the cwd itself, env overlay, workspace trust), the run's env and scrubbers,
// which CLI session to resume (the latest snapshot's unless the cwd changed: resume.ts) or the
// transcript to restore, attempt.started, and for a supervised turn its hook wiring. A check that
// fails ends the attempt with turn.failed.
import { prepareSupervisedRun, type DecisionHub, type SupervisedRun } from "../decisions/index.ts";
import type { EnvOverlay } from "../runner/index.ts";
import { isFailureKind, type AttemptStartedData, type FailureKind } from "../events/index.ts";
import { cwdProblem } from "../queue/index.ts";
import type { Attempt, PreparedAttempt, PreparedRun } from "./attempt-context.ts";
import { jobOptionsRefusal } from "./job-options.ts";
import { deadlineMsOf } from "./park.ts";
import { planResume, rebuildTranscript, RESTORE_PLAN, resumedCostBase } from "./resume.ts";
import { toolSandboxFor } from "./tool-sandbox.ts";
import { resolveEnv, runScrubbers, type RunEnv, type RunScrubbers } from "./run-env.ts";
import { CLI_TELEMETRY_TOKEN_NAME } from "./cli-telemetry.ts";
import { runTurnOptions } from "./turn-options.ts";
import type { WarmUse } from "./warm.ts";
import type { AttemptEnd } from "./types.ts";
import { BadCwdError, underRoots, WorkspaceNotAllowedError } from "./workspace.ts";

// attempt.started waits this long at most for the CLI's first line to share its append: one round
// trip fewer per turn, and live followers see the attempt start when its first output does. A worker
// that dies meanwhile leaves no attempt.started; the next attempt still records it abandoned
// (danglingAttempts goes by attempt numbers, not by starts).
const ATTEMPT_HOLD_MS = 1500;

export type Preparation = { prepared: PreparedAttempt } | { end: AttemptEnd };

export async function prepareAttempt(attempt: Attempt): Promise<Preparation> {
  const { worker, job, control, events, restore } = attempt;
  const refused = refusal(attempt);
  if (refused !== undefined) return { end: await events.fail(refused.errorKind, refused.name, refused.message) };
  let runEnv: RunEnv;
  try {
    runEnv = resolveEnv(job, worker.settings);
  } catch (err) {
    return { end: await events.fail("bad_payload", "BadPayload", (err as Error).message) };
  }
  const scrubbers = runScrubbers(worker, runEnv);
  events.useScrubber(scrubbers.scrubber);
  const plan = restore === undefined ? await planResume(worker.log, job, await attempt.snapshot) : RESTORE_PLAN;
  // A parked turn's CLI continues the turn from the session file: no new prompt.
  const { prompt, restoredTurns } =
    restore !== undefined
      ? await restorePrompt(attempt)
      : { prompt: attempt.parked === undefined ? job.prompt : undefined, restoredTurns: 0 };
  const sandboxing = toolSandboxFor(job, worker.settings.toolSandbox);
  const toolSandbox = "sandbox" in sandboxing ? sandboxing.sandbox : undefined;
  const access = await openAccess(attempt, runEnv);
  if ("end" in access) return access;
  await openCliTelemetry(attempt);
  const run: PreparedRun = {
    env: runEnv.env,
    modelEnv: access.env,
    telemetryEnv: control.cliTelemetry?.env,
    lines: scrubbers.lines,
    prompt,
    ...plan,
    costBaseUsd: undefined,
    restoredTurns,
    supervised: undefined,
    toolSandbox,
  };
  control.warm = warmUse(attempt, run);
  if (control.access !== undefined)
    control.access = await worker.access!.forNewProcess(control.access, control.warm, runEnv.env);
  await bindCliTelemetry(attempt, scrubbers);
  run.costBaseUsd = await resumedCostBase(worker.log, job.session, plan, control.warm?.label === "warm");
  await writeAttemptStarted(attempt, run);
  if (control.reason !== undefined) return { end: await events.stopped() };
  if (job.options.trustWorkspace === true && worker.settings.workspaceTrust !== "job") {
    const why =
      "the turn asks to trust its workspace, which this worker does not allow; set TURNSTREAM_WORKSPACE_TRUST=job on the worker, or drop trustWorkspace";
    return { end: await events.fail("bad_options", "WorkspaceTrustRefused", why) };
  }
  if ("refused" in sandboxing)
    return {
      end: await events.fail(sandboxing.refused.errorKind, sandboxing.refused.name, sandboxing.refused.message),
    };
  const optionsRefused = jobOptionsRefusal(job, worker.settings);
  if (optionsRefused !== undefined)
    return { end: await events.fail("bad_options", optionsRefused.name, optionsRefused.message) };
  const supervision = job.options.supervised === true ? await supervise(attempt) : undefined;
  if (supervision !== undefined && "failed" in supervision)
    return { end: await events.fail("bad_options", "SupervisedUnavailable", supervision.failed) };
  // The warm path may have moved the run to a new process, and so to a new token.
  const prepared: PreparedAttempt = {
    ...attempt,
    run: {
      ...run,
      modelEnv: control.access?.env,
      telemetryEnv: control.cliTelemetry?.env,
      supervised: supervision?.run,
    },
  };
  return { prepared };
}

/** The run's token at the worker's gateway (none in passthrough); a worker with no credential fails the turn. */
async function openAccess(
  attempt: Attempt,
  runEnv: RunEnv,
): Promise<{ env: EnvOverlay | undefined } | { end: AttemptEnd }> {
  const { worker, job, control, events } = attempt;
  if (worker.access === undefined) return { env: undefined };
  try {
    // A turn that runs warm keeps its session's token while its process is kept.
    control.access = await worker.access.open(job, events, runEnv.env, worker.warm.viaProcess(job));
    return { env: control.access.env };
  } catch (err) {
    const failure = err as Error & { kind?: string };
    // NoAuthError says `auth`; anything else is the gateway's own failure (it could not listen).
    const kind = failure.kind !== undefined && isFailureKind(failure.kind) ? failure.kind : "gateway";
    return { end: await events.fail(kind, failure.name, failure.message) };
  }
}

/**
 * The CLI's telemetry token, when the worker joins the CLI's spans to the attempt's or keeps its
 * metrics (a warm turn takes its session's). A receiver that could not start leaves the CLI's
 * telemetry off, not the turn.
 */
async function openCliTelemetry(attempt: Attempt): Promise<void> {
  const { worker, job, control, events } = attempt;
  if (worker.cliTelemetry === undefined) return;
  try {
    control.cliTelemetry = await worker.cliTelemetry.open(job, events.trace, worker.warm.viaProcess(job));
  } catch (err) {
    worker.logger.warn({ err: { message: (err as Error).message } }, "the CLI's telemetry is off for this run");
  }
}

/**
 * Once the warm decision is taken: a new process gets a token of its own, the run's scrubbers learn
 * it (the agent's tools can read it), and the CLI's spans from now on belong to this attempt (when
 * the worker traces).
 */
async function bindCliTelemetry(attempt: Attempt, scrubbers: RunScrubbers): Promise<void> {
  const { worker, control, events } = attempt;
  if (control.cliTelemetry === undefined) return;
  control.cliTelemetry = await worker.cliTelemetry!.forNewProcess(control.cliTelemetry, control.warm, events.trace);
  const { token } = control.cliTelemetry.grant;
  scrubbers.scrubber.addValue(CLI_TELEMETRY_TOKEN_NAME, token);
  scrubbers.lines?.addValue(CLI_TELEMETRY_TOKEN_NAME, token);
  if (events.trace === undefined) return;
  worker.cliTelemetry!.bind(control.cliTelemetry, {
    trace: events.trace,
    startedAt: events.startedAt,
    scrubber: scrubbers.scrubber,
  });
}

/** Why the turn cannot run on this worker at all, before anything is resolved. */
function refusal(attempt: Attempt): { errorKind: FailureKind; name: string; message: string } | undefined {
  const { job, worker } = attempt;
  const { retry, workspaceRoots } = worker.settings;
  // Runs that ended by parking are not failed attempts.
  const attemptNumber = attempt.events.attempt - (attempt.parked?.parks ?? 0);
  if (attemptNumber > retry.maxAttempts) {
    return {
      errorKind: "too_many_attempts",
      name: "TooManyAttempts",
      message: `the turn had ${attemptNumber - 1} attempts (limit ${retry.maxAttempts})`,
    };
  }
  if (!underRoots(job.cwd, workspaceRoots)) {
    const error = new WorkspaceNotAllowedError(workspaceRoots);
    return { errorKind: error.kind, name: error.name, message: error.message };
  }
  const problem = cwdProblem(job.cwd);
  if (problem !== undefined) {
    const error = new BadCwdError(job.cwd, problem, worker.settings.workerId);
    return { errorKind: error.kind, name: error.name, message: error.message };
  }
  return undefined;
}

/**
 * The prompt of a run whose CLI session was lost: the session so far as a transcript from the log, then the turn's own
 * prompt.
 */
async function restorePrompt(attempt: Attempt): Promise<{ prompt: string; restoredTurns: number }> {
  const { job } = attempt;
  const transcript = await rebuildTranscript(attempt.worker.log, job.session, job.turn);
  const prompt =
    `The earlier part of this conversation could not be restored, so here it is as a transcript:\n\n` +
    `<transcript>\n${transcript.text}\n</transcript>\n\nContinue from there. The user's new message:\n\n${job.prompt}`;
  return { prompt, restoredTurns: transcript.turns };
}

/**
 * The attempt's warm decision, taken with the options the run will start with (supervision adds nothing a warm turn
 * keeps).
 */
function warmUse(attempt: Attempt, run: PreparedRun): WarmUse | undefined {
  const { worker, job, events } = attempt;
  if (!worker.warm.wants(job)) {
    worker.warm.drop(job.session);
    return undefined;
  }
  return worker.warm.choose(job, runTurnOptions(attempt, run), events.lastSnapshot);
}

async function writeAttemptStarted(attempt: Attempt, run: PreparedRun): Promise<void> {
  const { worker, job, events } = attempt;
  const warm = attempt.control.warm;
  const started: AttemptStartedData = { worker: worker.settings.workerId, attempt: events.attempt, cwd: job.cwd };
  if (job.options.model !== undefined) started.model = job.options.model;
  if (job.options.maxBudgetUsd !== undefined) started.maxBudgetUsd = job.options.maxBudgetUsd;
  const cliVersion = await worker.cliVersion();
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
async function supervise(attempt: Attempt): Promise<{ run: SupervisedRun } | { failed: string }> {
  const { worker, job, events } = attempt;
  if (worker.decisionHub === undefined) return { failed: "this worker has no decision hub for supervised turns" };
  let hub: DecisionHub;
  try {
    hub = await worker.decisionHub();
  } catch (err) {
    // e.g. no operator keys: no decision could be verified.
    return { failed: (err as Error).message };
  }
  const options = job.options;
  const run = prepareSupervisedRun(hub, {
    session: job.session,
    turn: job.turn,
    attempt: events.attempt,
    epoch: events.epoch,
    cwd: job.cwd,
    logger: worker.logger,
    riskyTools: options.riskyTools,
    unsupervisedTools: options.unsupervisedTools,
    park: worker.settings.parking.enabled ? { deadlineMs: deadlineMsOf(job, worker) } : undefined,
    resume: attempt.parked?.call,
  });
  return { run };
}
