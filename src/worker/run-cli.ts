// The run step: take a CLI slot, start the CLI (runTurn) with the job's options under the worker's
// rules, and append its stdout lines and stderr as they come, within the worker's output limits.
// Ends once the CLI's outcome is known and every line it printed has been handed to the writer.
import { runTurn, type TurnOutcome } from "../runner/index.ts";
import type { CliExitData } from "../events/index.ts";
import { isKnown, type ParsedLine } from "../protocol/index.ts";
import type { Scrubber } from "../telemetry/index.ts";
import type { CliRun, PreparedAttempt } from "./attempt-context.ts";
import { errFields } from "./error-fields.ts";
import type { WorkerSettings } from "./options.ts";
import { runTurnOptions } from "./turn-options.ts";
import type { AttemptEnd } from "./types.ts";
import type { CliHandle } from "./warm.ts";

// The CLI exits shortly after its result line, and the turn's end (exit, snapshot, turn.finished)
// follows at once: the result line waits this long to share their append, one round trip fewer per
// turn; live followers see it at most this much later, the turn's end not at all.
const RESULT_LINGER_MS = 100;

export async function runCli(attempt: PreparedAttempt): Promise<{ ran: CliRun } | { end: AttemptEnd }> {
  const { worker, control, events, run } = attempt;
  // Taken only now, so the lease, the begin and attempt.started are done while a CLI that has
  // printed its result is still exiting.
  const release = control.slot === undefined ? () => undefined : await control.slot.acquire(control.ac.signal);
  if (release === undefined) {
    run.supervised?.close();
    control.reason ??= "shutdown";
    return { end: await events.stopped() };
  }
  let handle: CliHandle;
  try {
    const options = runTurnOptions(attempt, run);
    const warm = control.warm;
    handle = warm?.viaProcess === true ? worker.warm.run(warm, options) : runTurn(options);
  } catch (err) {
    release();
    run.supervised?.close();
    const fields = errFields(err);
    return { end: await events.fail(fields.kind, fields.name, fields.message) };
  }
  void handle.exited.then(release);
  const supervised = run.supervised;
  if (supervised !== undefined) void handle.outcome.then(supervised.close, supervised.close);
  return drain(attempt, handle);
}

/** Writes the run's output as it comes and waits for its outcome. A fenced attempt writes nothing more. */
async function drain(attempt: PreparedAttempt, handle: CliHandle): Promise<{ ran: CliRun } | { end: AttemptEnd }> {
  const { control, events } = attempt;
  const { lines } = attempt.run;
  const hints: ParsedLine[] = [];
  const limit = outputLimit(attempt.worker.settings, () => handle.kill());
  const fenced = (): boolean => control.ac.signal.aborted && control.reason === "fenced";
  const pumps = Promise.allSettled([
    (async () => {
      for await (const line of handle.lines) {
        if (fenced() || !limit.take(lineBytes(line))) continue;
        const result = isKnown(line, "result");
        if (line.type === "system/api_retry" || line.type === "rate_limit_event") hints.push(line);
        else if (result) control.slot?.ending();
        await events.write("cli.line", lineData(line, lines), {
          parsed: line,
          wait: result ? { lingerMs: RESULT_LINGER_MS } : undefined,
        });
      }
    })(),
    (async () => {
      for await (const chunk of handle.stderr) {
        if (fenced() || !limit.take(Buffer.byteLength(chunk))) continue;
        await events.write("cli.stderr", { text: events.scrubMessage(chunk) });
      }
    })(),
  ]);
  let outcome: TurnOutcome | undefined;
  let failure: unknown;
  try {
    outcome = await handle.outcome;
  } catch (err) {
    failure = err;
  }
  const pumped = await pumps;
  if (control.reason === "fenced") return { end: { kind: "stopped", attempt: events.attempt, reason: "fenced" } };
  const pumpFailure = pumped.find((p) => p.status === "rejected");
  if (pumpFailure !== undefined && control.reason === undefined) throw pumpFailure.reason;
  const ef = failure as { exitCode?: number | null; signal?: string | null } | undefined;
  const exit: CliExitData = {
    code: outcome?.exitCode ?? ef?.exitCode ?? null,
    signal: outcome?.signal ?? ef?.signal ?? null,
    durationMs: outcome?.durationMs ?? 0,
  };
  if (handle.pid !== undefined) exit.pid = handle.pid;
  return { ran: { outcome, failure, exit, hints, outputLimitExceeded: limit.exceeded } };
}

/**
 * A `cli.line`'s data: the raw line, scrubbed unless the worker keeps raw lines; an over-long line only by its size and
 * hash.
 */
function lineData(
  line: ParsedLine,
  lines: Scrubber | undefined,
): { raw: string; truncated?: { byteLength: number; sha256: string } } {
  if (line.category === "truncated")
    return { raw: "", truncated: { byteLength: line.byteLength, sha256: line.sha256 } };
  return { raw: lines === undefined ? line.raw : lines.scrub(line.raw, { sink: "log", field: "cli.line" }) };
}

const lineBytes = (l: ParsedLine): number => (l.category === "truncated" ? l.byteLength : Buffer.byteLength(l.raw));

interface OutputLimit {
  /** Counts one line of output; false once the run is past a limit (the line is not to be written). */
  take(bytes: number): boolean;
  /** Why the run was ended, once it was. */
  readonly exceeded: string | undefined;
}

const sizeText = (bytes: number): string =>
  bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`;

/**
 * A run's output against the worker's limits (a job cannot raise them): the first line past either
 * ends the run, so a tool that floods stdout cannot fill Redis through one turn.
 */
function outputLimit(
  settings: Pick<WorkerSettings, "maxOutputLines" | "maxOutputBytes">,
  end: () => void,
): OutputLimit {
  let lines = 0;
  let bytes = 0;
  let exceeded: string | undefined;
  return {
    take(byteCount) {
      if (exceeded !== undefined) return false;
      lines++;
      bytes += byteCount;
      if (lines > settings.maxOutputLines) {
        exceeded = `the CLI printed more than ${settings.maxOutputLines} lines of output; the run was ended. The limit is the worker's option maxOutputLines`;
      } else if (bytes > settings.maxOutputBytes) {
        exceeded = `the CLI printed more than ${sizeText(settings.maxOutputBytes)} of output; the run was ended. The limit is the worker's option maxOutputBytes`;
      }
      if (exceeded === undefined) return true;
      end();
      return false;
    },
    get exceeded() {
      return exceeded;
    },
  };
}
