// The re-run entries of `turnstream batch`: each runs through rerunSession, as `turnstream rerun` does,
// one after another (each starts the real CLI; the queued turns run beside them on the fleet), and
// becomes one test case: finished when the runs match, failed (task failed, the readable diff as its
// message) when they differ, usage when the session or turn is not there, infrastructure otherwise.
import type { Envelope, RedisClient } from "../../log/index.ts";
import type { Scrub } from "../../projector/index.ts";
import { NoRecordedTurnError, RecordingRefusedError, renderComparison } from "../../rerun/index.ts";
import type { Outcome } from "../exit-codes.ts";
import type { BatchRerun } from "../reports/batch-file.ts";
import type { ProgressView, TurnProgress } from "../reports/progress.ts";
import type { BatchTurnResult } from "../reports/turn-result.ts";
import { rerunSession } from "./_rerun.ts";

export interface RerunCase {
  /** Its place in the batch file's entries, which is its progress line. */
  index: number;
  spec: BatchRerun;
  progress: TurnProgress;
}

/** What the re-runs of one batch share. */
export interface RerunContext {
  redis: RedisClient;
  logPrefix: string;
  /** The batch's --timeout or interrupt. */
  signal: AbortSignal;
  /** How a case the signal stopped counts: the outcome of the signal's reason. */
  stopOutcome(reason: unknown): Outcome | undefined;
  view: ProgressView;
  scrub: Scrub;
}

/** The command that runs the same re-run on its own. */
function rerunCommand({ session, turn, cwd, permissionMode }: BatchRerun["rerun"]): string {
  const mode = permissionMode === "default" ? [] : ["--permission-mode", permissionMode];
  const picked = turn === undefined ? [] : ["--turn", turn];
  return ["turnstream rerun", session, ...picked, "--cwd", cwd, ...mode].join(" ");
}

type Verdict = Pick<BatchTurnResult, "status" | "outcome" | "errorKind" | "message">;

function caseResult(c: RerunCase, turn: string, seconds: number, verdict: Verdict, scrub: Scrub): BatchTurnResult {
  const s = c.spec.rerun;
  const base = {
    line: c.spec.line,
    label: scrub(c.spec.label),
    session: s.session,
    turn,
    attempts: c.progress.attempt,
    toolCalls: c.progress.toolCalls,
    seconds,
  };
  return {
    ...base,
    ...verdict,
    message: verdict.message === undefined ? undefined : scrub(verdict.message),
    resultText: undefined,
    command: scrub(rerunCommand(s)),
  };
}

function failedVerdict(session: string, err: unknown, stopped: Outcome | undefined): Verdict {
  if (err instanceof NoRecordedTurnError)
    return {
      status: "failed",
      outcome: "usage",
      errorKind: "no_recorded_turn",
      message: `session ${session}: ${err.message}`,
    };
  if (err instanceof RecordingRefusedError) {
    return { status: "failed", outcome: "usage", errorKind: "recording_refused", message: `refused: ${err.message}` };
  }
  if (stopped !== undefined)
    return {
      status: "unended",
      outcome: stopped,
      errorKind: undefined,
      message: `the batch stopped the re-run before it ended (${stopped})`,
    };
  return {
    status: "failed",
    outcome: "infrastructure",
    errorKind: undefined,
    message: `the re-run could not run: ${(err as Error)?.message ?? String(err)}`,
  };
}

async function runCase(x: RerunContext, c: RerunCase): Promise<BatchTurnResult> {
  const { signal, view, scrub } = x;
  const started = Date.now();
  const onEvent = (e: Envelope): void => {
    if (c.progress.read(e)) view.changed(c.index);
  };
  const end = (state: string): void => {
    c.progress.state = state;
    view.changed(c.index);
  };
  const s = c.spec.rerun;
  try {
    signal.throwIfAborted();
    const { session, cwd, permissionMode } = s;
    const r = await rerunSession({
      redis: x.redis,
      logPrefix: x.logPrefix,
      session,
      turn: s.turn,
      cwd,
      permissionMode,
      signal,
      onEvent,
    });
    const turn = r.comparison.turns.map((t) => t.recordedTurn).join(" ");
    end(r.comparison.match ? "match" : "differs");
    const verdict: Verdict = r.comparison.match
      ? { status: "finished", outcome: "finished", errorKind: undefined, message: undefined }
      : {
          status: "failed",
          outcome: "task_failed",
          errorKind: "rerun_differs",
          message: renderComparison(r.comparison).trimEnd(),
        };
    return caseResult(c, turn, r.seconds, verdict, scrub);
  } catch (err) {
    const verdict = failedVerdict(s.session, err, signal.aborted ? x.stopOutcome(signal.reason) : undefined);
    end(verdict.status === "unended" ? "unended" : "error");
    return caseResult(c, s.turn ?? "", (Date.now() - started) / 1000, verdict, scrub);
  }
}

/** Every re-run case in file order, one at a time; each one's result once it is over. */
export async function runReruns(x: RerunContext, cases: readonly RerunCase[]): Promise<BatchTurnResult[]> {
  const out: BatchTurnResult[] = [];
  for (const c of cases) out.push(await runCase(x, c));
  return out;
}
