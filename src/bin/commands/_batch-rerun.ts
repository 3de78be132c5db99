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
import { turnReport, type BatchTurnResult } from "../reports/turn-result.ts";
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

function caseResult(
  rerunCase: RerunCase,
  turn: string,
  seconds: number,
  verdict: Verdict,
  scrub: Scrub,
): BatchTurnResult {
  const spec = rerunCase.spec.rerun;
  const figures = { ...rerunCase.progress.figures(), seconds };
  const ending = { ...verdict, attempts: rerunCase.progress.attempt, resultText: undefined };
  return {
    line: rerunCase.spec.line,
    label: scrub(rerunCase.spec.label),
    ...turnReport({ session: spec.session, turn }, figures, ending, scrub),
    command: scrub(rerunCommand(spec)),
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

async function runCase(context: RerunContext, rerunCase: RerunCase): Promise<BatchTurnResult> {
  const { signal, view, scrub } = context;
  const started = Date.now();
  const onEvent = (event: Envelope): void => {
    if (rerunCase.progress.read(event)) view.changed(rerunCase.index);
  };
  const end = (state: string): void => {
    rerunCase.progress.state = state;
    view.changed(rerunCase.index);
  };
  const spec = rerunCase.spec.rerun;
  try {
    signal.throwIfAborted();
    const { session, cwd, permissionMode } = spec;
    const rerun = await rerunSession({
      redis: context.redis,
      logPrefix: context.logPrefix,
      session,
      turn: spec.turn,
      cwd,
      permissionMode,
      signal,
      onEvent,
    });
    const turn = rerun.comparison.turns.map((t) => t.recordedTurn).join(" ");
    end(rerun.comparison.match ? "match" : "differs");
    const verdict: Verdict = rerun.comparison.match
      ? { status: "finished", outcome: "finished", errorKind: undefined, message: undefined }
      : {
          status: "failed",
          outcome: "task_failed",
          errorKind: "rerun_differs",
          message: renderComparison(rerun.comparison).trimEnd(),
        };
    return caseResult(rerunCase, turn, rerun.seconds, verdict, scrub);
  } catch (err) {
    const verdict = failedVerdict(spec.session, err, signal.aborted ? context.stopOutcome(signal.reason) : undefined);
    end(verdict.status === "unended" ? "unended" : "error");
    return caseResult(rerunCase, spec.turn ?? "", (Date.now() - started) / 1000, verdict, scrub);
  }
}

/** Every re-run case in file order, one at a time; each one's result once it is over. */
export async function runReruns(context: RerunContext, cases: readonly RerunCase[]): Promise<BatchTurnResult[]> {
  const out: BatchTurnResult[] = [];
  for (const rerunCase of cases) out.push(await runCase(context, rerunCase));
  return out;
}
