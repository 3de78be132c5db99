// `turnstream batch FILE`: check every turn of a JSONL or YAML file (nothing is enqueued when one line is
// bad), enqueue them all at once, follow them together, and exit with the worst turn's outcome (see
// ../reports/turn-result.ts for the order), writing a JUnit file and GitHub annotations on request.
// Re-run entries run in this process beside them (./_batch-rerun.ts) and are reported alike. A turn that
// parks on a supervised call is said on stderr with the command that decides it; with --exit-on-park
// the batch stops waiting for it and reports it parked (exit 5 when no turn did worse).
import { TurnstreamError } from "../../kernel/index.ts";
import { appendFileSync, writeFileSync } from "node:fs";
import type { Envelope, RedisClient } from "../../log/index.ts";
import { connectForCommand, type Scrub } from "../../projector/index.ts";
import { type EnqueueResult, type Producer, type TurnResult } from "../../queue/index.ts";
import { EXIT, exitCodeOf, type Outcome } from "../exit-codes.ts";
import { BatchFileError, isRerun, loadBatchFile, type BatchEntry, type BatchTurn } from "../reports/batch-file.ts";
import { annotations, stepSummary } from "../reports/github.ts";
import { junitXml } from "../reports/junit.ts";
import { progressView, TurnProgress, type ProgressView } from "../reports/progress.ts";
import {
  batchReport,
  countByStatus,
  endingOf,
  secondsText,
  seeCommand,
  turnReport,
  type BatchReport,
  type BatchTurnResult,
  type TurnEndingFields,
} from "../reports/turn-result.ts";
import { producerWithArchive } from "./_archive.ts";
import { interruptSignal, parseCommandArgs, type ParsedArgs } from "./_args.ts";
import { runReruns, type RerunCase } from "./_batch-rerun.ts";
import {
  logPrefix,
  ARCHIVE_FLAG_OPTIONS,
  ARCHIVE_FLAG_USAGE,
  QUEUE_FLAG_OPTIONS,
  QUEUE_FLAGS_USAGE,
  queueConfigOf,
} from "./_connect.ts";
import { BadDurationError, durationFlag } from "./_duration.ts";
import { ParkWatch, parkedNotice, timeLeft, TurnParkedStop, type ParkedView } from "./_parked.ts";
import { defaultScrub } from "./_scrub.ts";

export const summary = "enqueue every turn of a JSONL or YAML file, follow them together, exit with the worst outcome";

const usage = `usage: turnstream batch FILE [--timeout D] [--exit-on-park] [--json] [--junit FILE] [--github] [--check] [--archive URL]
                      [--prefix P] [--queue-prefix Q] [--queue NAME]
  FILE              JSONL, one turn per line, or a YAML list of turns (.yaml, .yml): the enqueue input (session, prompt or a {{template}} with
                    variables, cwd, options, idempotencyKey, labels, tenant) and an optional "label" for the reports;
                    a relative or missing cwd is taken from where the command runs. A bad line is a
                    usage error naming the line and the field (exit 2), and nothing is enqueued.
                    An entry {"rerun": SESSION, "turn"?: T, "cwd"?: DIR, "label"?: L} re-runs a recorded
                    session as \`turnstream rerun\` does, in this process: it passes when the runs
                    match and fails (exit 1) with the diff when they differ.
  --timeout D       stop waiting for the batch after D (its unended turns count as timed out, exit 4,
                    and go on running); D is 30s, 10m, 1h or milliseconds
  --exit-on-park    stop waiting for a turn as soon as it parks on a supervised call (it waits for its
                    decision, holding nothing, and resumes on a worker once decided): it counts as
                    parked, a skipped JUnit testcase whose message says how to decide it. Without it,
                    stderr says when a turn parks and how to decide it, and the batch waits on
  --json            one JSON object on stdout: each turn's result, the batch's outcome and exitCode
  --junit FILE      write a JUnit XML report: one testcase per turn
  --github          GitHub Actions: an ::error annotation per failed turn (on stdout; stderr under
                    --json) and a Markdown summary appended to $GITHUB_STEP_SUMMARY
  --check           check the file and exit (0 or 2) without Redis or enqueueing
${ARCHIVE_FLAG_USAGE}${QUEUE_FLAGS_USAGE}Exit: the worst turn's code, worst first 3 (infrastructure) > 2 (usage) > 1 (task failed)
> 4 (cancelled or timed out) > 5 (parked, with --exit-on-park) > 0 (all finished).
`;

const options = {
  timeout: { type: "string" },
  "exit-on-park": { type: "boolean" },
  json: { type: "boolean" },
  junit: { type: "string" },
  github: { type: "boolean" },
  check: { type: "boolean" },
  ...QUEUE_FLAG_OPTIONS,
  ...ARCHIVE_FLAG_OPTIONS,
  help: { type: "boolean", short: "h" },
} as const;

type BatchArgs = ParsedArgs<{ allowPositionals: true; options: typeof options }>;
type BatchValues = BatchArgs["values"];

/** Why the batch stopped waiting before every turn ended: --timeout passed. */
class BatchTimeoutError extends TurnstreamError {
  constructor(message: string) {
    super(message, { code: "batch_timeout" });
  }
}

interface QueuedTurn {
  index: number;
  spec: BatchTurn;
  queued: EnqueueResult;
  progress: TurnProgress;
}

/** Says how the command ended before any turn was followed: JSON on stdout under --json, else stderr. */
function reportEarly(json: boolean | undefined, scrub: Scrub, outcome: Outcome, message: string): number {
  const exitCode = exitCodeOf(outcome);
  if (json) process.stdout.write(scrub(JSON.stringify({ error: message, outcome, exitCode })) + "\n");
  else process.stderr.write(scrub(`turnstream batch: ${message}\n`));
  return exitCode;
}

function outcomeOfError(err: unknown): Outcome {
  return err instanceof BatchFileError || err instanceof BadDurationError ? "usage" : "infrastructure";
}

/**
 * Enqueues every turn: sessions side by side, each session's turns one after another in file order,
 * since the order they reach the session's pending list is the order they run in.
 */
async function enqueueAll(producer: Producer, turns: readonly BatchTurn[]): Promise<EnqueueResult[]> {
  const results: EnqueueResult[] = new Array(turns.length);
  const bySession = new Map<string, number[]>();
  turns.forEach((turn, index) => {
    // A turn without a session starts a session of its own, so it orders with nothing.
    const key = turn.input.session ?? `\0${index}`;
    bySession.set(key, [...(bySession.get(key) ?? []), index]);
  });
  await Promise.all(
    [...bySession.values()].map(async (indexes) => {
      for (const index of indexes) results[index] = await producer.enqueueTurn(turns[index]!.input);
    }),
  );
  return results;
}

function resultOf(queuedTurn: QueuedTurn, scrub: Scrub, ending: TurnEndingFields): BatchTurnResult {
  return {
    line: queuedTurn.spec.line,
    label: scrub(queuedTurn.spec.label),
    ...turnReport(queuedTurn.queued, queuedTurn.progress.figures(), ending, scrub),
    tenant: queuedTurn.queued.tenant,
  };
}

function endedResult(queuedTurn: QueuedTurn, result: TurnResult, scrub: Scrub): BatchTurnResult {
  return resultOf(queuedTurn, scrub, endingOf(result));
}

/** How a case the batch's signal stopped counts: timed out (--timeout) or cancelled (interrupt). */
function stopOutcome(reason: unknown): Outcome | undefined {
  if (reason instanceof BatchTimeoutError) return "timed_out";
  return reason instanceof DOMException && reason.name === "AbortError" ? "cancelled" : undefined;
}

/** The batch stopped waiting (timeout, interrupt) or could not (Redis went away) before the turn ended. */
function unendedResult(queuedTurn: QueuedTurn, err: unknown, scrub: Scrub): BatchTurnResult {
  const stillRuns = `it goes on running (turnstream cancel ${queuedTurn.queued.turn} stops it)`;
  const stopped = stopOutcome(err);
  const [outcome, message]: [Outcome, string] =
    stopped === "timed_out"
      ? ["timed_out", `${(err as Error).message}; ${stillRuns}`]
      : stopped === "cancelled"
        ? ["cancelled", `the batch was interrupted; ${stillRuns}`]
        : ["infrastructure", `following the turn failed: ${(err as Error).message ?? String(err)}`];
  const ending = {
    status: "unended" as const,
    outcome,
    attempts: queuedTurn.progress.attempt,
    errorKind: undefined,
    message,
    resultText: undefined,
  };
  return resultOf(queuedTurn, scrub, ending);
}

/** A turn left parked (--exit-on-park): skipped, with what it waits on and how to decide it. */
function parkedResult(queuedTurn: QueuedTurn, parked: ParkedView, scrub: Scrub): BatchTurnResult {
  const message =
    `parked: its ${parked.tool} call (request ${parked.requestId}) waits for an operator's decision until ` +
    `${parked.deadline} (${timeLeft(parked.deadline)}); decide it with: ${parked.decideCommand}`;
  const ending = {
    status: "parked" as const,
    outcome: "parked" as const,
    attempts: queuedTurn.progress.attempt,
    errorKind: undefined,
    message,
    resultText: undefined,
  };
  return { ...resultOf(queuedTurn, scrub, ending), requestId: parked.requestId, decideCommand: parked.decideCommand };
}

async function followOne(
  producer: Producer,
  queuedTurn: QueuedTurn,
  batch: AbortSignal,
  view: ProgressView,
  scrub: Scrub,
  exitOnPark: boolean,
): Promise<BatchTurnResult> {
  const parkStop = new AbortController();
  const parks = new ParkWatch(queuedTurn.queued.session, queuedTurn.queued.turn, (parked) => {
    const notice = parkedNotice(`turnstream batch: ${queuedTurn.spec.label}`, parked, !exitOnPark);
    view.interject(() => process.stderr.write(scrub(notice)));
    if (exitOnPark) parkStop.abort(new TurnParkedStop(parked));
  });
  const onEvent = (event: Envelope): void => {
    if (queuedTurn.progress.read(event)) view.changed(queuedTurn.index);
    parks.onEvent(event);
  };
  const signal = AbortSignal.any([batch, parkStop.signal]);
  try {
    const result = await producer.waitForTurn(queuedTurn.queued.turn, {
      session: queuedTurn.queued.session,
      onEvent,
      signal,
    });
    return endedResult(queuedTurn, result, scrub);
  } catch (err) {
    const reason = signal.aborted ? signal.reason : err;
    if (reason instanceof TurnParkedStop) return parkedResult(queuedTurn, reason.parked, scrub);
    queuedTurn.progress.state = "unended";
    view.changed(queuedTurn.index);
    return unendedResult(queuedTurn, reason, scrub);
  }
}

/** One signal for the whole batch: --timeout or Ctrl-C/SIGTERM, whichever comes first. */
function batchSignal(
  timeoutMs: number | undefined,
  timeoutText: string | undefined,
): { signal: AbortSignal; release(): void } {
  const interrupt = interruptSignal();
  const controller = new AbortController();
  const onInterrupt = (): void => controller.abort(new DOMException("interrupted", "AbortError"));
  interrupt.signal.addEventListener("abort", onInterrupt, { once: true });
  const timer =
    timeoutMs === undefined
      ? undefined
      : setTimeout(
          () => controller.abort(new BatchTimeoutError(`the batch did not end within --timeout (${timeoutText})`)),
          timeoutMs,
        );
  return {
    signal: controller.signal,
    release() {
      clearTimeout(timer);
      interrupt.release();
    },
  };
}

/** Follows the queued turns and runs the re-runs together; every case's result in batch-file order. */
async function followAll(
  producer: Producer,
  redis: RedisClient,
  queued: QueuedTurn[],
  reruns: RerunCase[],
  values: BatchValues,
  scrub: Scrub,
): Promise<BatchTurnResult[]> {
  // Under --json stdout holds the one JSON object only, so progress goes to stderr as plain lines.
  const out = values.json ? process.stderr : process.stdout;
  const progress = [...queued, ...reruns].sort((a, b) => a.index - b.index).map((c) => c.progress);
  const view = progressView(progress, values.json ? undefined : process.stdout, (text) => void out.write(scrub(text)));
  const stop = batchSignal(durationFlag("timeout", values.timeout), values.timeout);
  try {
    const rerunContext = {
      redis,
      logPrefix: logPrefix(queueConfigOf(values).logPrefix),
      signal: stop.signal,
      stopOutcome,
      view,
      scrub,
    };
    const [turns, rerun] = await Promise.all([
      Promise.all(queued.map((q) => followOne(producer, q, stop.signal, view, scrub, values["exit-on-park"] === true))),
      runReruns(rerunContext, reruns),
    ]);
    return [...turns, ...rerun].sort((a, b) => a.line - b.line);
  } finally {
    stop.release();
    view.close();
  }
}

function writeJunit(path: string, report: BatchReport, scrub: Scrub): void {
  try {
    writeFileSync(path, scrub(junitXml(report)));
  } catch (err) {
    process.stderr.write(
      scrub(`turnstream batch: cannot write --junit ${path} (${(err as NodeJS.ErrnoException).code ?? "error"})\n`),
    );
  }
}

function writeGithub(report: BatchReport, json: boolean | undefined, scrub: Scrub): void {
  const out = json ? process.stderr : process.stdout;
  for (const line of annotations(report)) out.write(`${scrub(line)}\n`);
  const summaryFile = process.env["GITHUB_STEP_SUMMARY"];
  if (summaryFile === undefined || summaryFile === "") return;
  try {
    appendFileSync(summaryFile, scrub(stepSummary(report)));
  } catch (err) {
    process.stderr.write(
      scrub(
        `turnstream batch: cannot append to $GITHUB_STEP_SUMMARY (${(err as NodeJS.ErrnoException).code ?? "error"})\n`,
      ),
    );
  }
}

function printOutcome(report: BatchReport, json: boolean | undefined, scrub: Scrub): void {
  if (json) {
    process.stdout.write(scrub(JSON.stringify(report)) + "\n");
    return;
  }
  for (const turn of report.turns.filter((t) => t.status !== "finished")) {
    process.stdout.write(
      scrub(
        `${turn.label}: ${turn.status}${turn.errorKind === undefined ? "" : ` (${turn.errorKind})`}: ${turn.message ?? ""} — ${seeCommand(turn)}\n`,
      ),
    );
  }
  const counts = Object.entries(countByStatus(report.turns))
    .filter(([, n]) => n > 0)
    .map(([status, n]) => `${n} ${status}`);
  process.stdout.write(
    `batch: ${counts.join(", ")} in ${secondsText(report.seconds)}: ${report.outcome} (exit ${report.exitCode})\n`,
  );
}

async function runBatch(file: string, entries: BatchEntry[], values: BatchValues, scrub: Scrub): Promise<number> {
  const redis = await connectForCommand();
  const producer = await producerWithArchive({ redis, ...queueConfigOf(values) }, values.archive);
  try {
    const startedAt = new Date();
    const indexes = entries.flatMap((e, i) => (isRerun(e) ? [] : [i]));
    const turns = indexes.map((i) => entries[i] as BatchTurn);
    const queued = (await enqueueAll(producer, turns)).map((enqueued, position): QueuedTurn => ({
      index: indexes[position]!,
      spec: turns[position]!,
      queued: enqueued,
      progress: new TurnProgress(turns[position]!.label),
    }));
    const reruns = entries.flatMap((e, index): RerunCase[] =>
      isRerun(e) ? [{ index, spec: e, progress: new TurnProgress(e.label) }] : [],
    );
    if (!values.json)
      process.stdout.write(
        `batch: ${queued.length} turn(s) queued${reruns.length === 0 ? "" : `, ${reruns.length} re-run(s)`}\n`,
      );
    const report = batchReport(file, startedAt, await followAll(producer, redis, queued, reruns, values, scrub));
    if (values.junit !== undefined) writeJunit(values.junit, report, scrub);
    if (values.github) writeGithub(report, values.json, scrub);
    printOutcome(report, values.json, scrub);
    return report.exitCode;
  } finally {
    await producer.close();
    redis.disconnect();
  }
}

/**
 * After a refused command line (usage on stderr), a pipeline reading --json stdout still gets its one object, as with
 * `run`.
 */
function commandLineRefused(code: number, argv: readonly string[]): number {
  const flags = argv.includes("--") ? argv.slice(0, argv.indexOf("--")) : argv;
  if (code === EXIT.usage && flags.includes("--json"))
    reportEarly(true, (s) => s, "usage", "the command line is not valid; the usage is on stderr");
  return code;
}

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("batch", usage, { args: argv, allowPositionals: true, options });
  if (typeof args === "number") return commandLineRefused(args, argv);
  if (args.positionals.length !== 1) {
    process.stderr.write(`turnstream batch: takes exactly one batch FILE, got ${args.positionals.length}\n${usage}`);
    return commandLineRefused(EXIT.usage, argv);
  }
  const file = args.positionals[0]!;
  const scrub = defaultScrub();
  try {
    durationFlag("timeout", args.values.timeout);
    const turns = loadBatchFile(file);
    if (!args.values.check) return await runBatch(file, turns, args.values, scrub);
    const reruns = turns.filter(isRerun).length;
    if (!args.values.json)
      process.stdout.write(
        `${file}: ${turns.length - reruns} turn(s)${reruns === 0 ? "" : ` and ${reruns} re-run(s)`}, all valid\n`,
      );
    else
      process.stdout.write(
        `${JSON.stringify({ file, turns: turns.length, outcome: "finished", exitCode: EXIT.finished })}\n`,
      );
    return EXIT.finished;
  } catch (err) {
    return reportEarly(args.values.json, scrub, outcomeOfError(err), err instanceof Error ? err.message : String(err));
  }
}
