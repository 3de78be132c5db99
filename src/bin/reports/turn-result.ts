// What the commands that follow turns (`run --wait`, `batch`) know of each turn once it is over, and a
// batch's own outcome: the one shape the JSON output, the JUnit file and the GitHub summary are written
// from. Every text field here is scrubbed already, so the reports can print it as it is.
import { dataOf } from "../../events/index.ts";
import type { Tokens } from "../../projector/index.ts";
import type { TurnResult } from "../../queue/index.ts";
import { exitCodeOf, outcomeOfTurn, type Outcome } from "../exit-codes.ts";

/**
 * How a turn ended; `unended` when the command stopped waiting first (--timeout, Ctrl-C, Redis gone);
 * `parked` when it parked on a supervised call and the command stopped following it (--exit-on-park).
 */
export type TurnEnding = "finished" | "failed" | "cancelled" | "unended" | "parked";

/** What following a turn measured of it (TurnProgress): its tool calls, its time and its spend. */
export interface TurnFigures {
  toolCalls: number;
  /** From the first attempt's start to the turn's end (0 when it never started). */
  seconds: number;
  /**
   * What the turn's runs cost, abandoned attempts included (their tokens were paid for): for each run,
   * the rise of its CLI session's running total (costAdded).
   */
  costUsd: number;
  /** Tokens of every result line of every run, summed. */
  tokens: Tokens;
}

/** How a turn ended, as the command saw it; `O`: the outcomes it can say (`run` also says `interrupted`). */
export interface TurnEndingFields<O extends string = Outcome> {
  status: TurnEnding;
  outcome: O;
  /** The attempt the turn ended on (0 when no worker ever started it). */
  attempts: number;
  errorKind: string | undefined;
  /** Why it failed, was cancelled or did not end (scrubbed in a report). */
  message: string | undefined;
  resultText: string | undefined;
}

/** What every report says of one turn: `run --wait --json` prints it, a batch's per-turn result extends it. */
export interface TurnReport<O extends string = Outcome> extends TurnFigures, TurnEndingFields<O> {
  session: string;
  turn: string;
}

export interface BatchTurnResult extends TurnReport {
  /** The turn's line in the batch file (1-based), so a report can point back at it. */
  line: number;
  /** The line's `label`, else the start of its prompt. */
  label: string;
  /** The turn's tenant (the one its line named, else its session's); undefined when none (a re-run's too). */
  tenant?: string | undefined;
  /** The command that shows this case again, when it is not `turnstream replay <session>` (a re-run's). */
  command?: string | undefined;
  /** A parked turn's request, and the command that decides it. */
  requestId?: string | undefined;
  decideCommand?: string | undefined;
}

/** The report of a turn: where it is, what following it measured and how it ended, its texts scrubbed. */
export function turnReport<O extends string = Outcome>(
  where: { session: string; turn: string },
  figures: TurnFigures,
  ending: TurnEndingFields<O>,
  scrub: (text: string) => string,
): TurnReport<O> {
  const optional = (text: string | undefined): string | undefined => (text === undefined ? undefined : scrub(text));
  return {
    session: where.session,
    turn: where.turn,
    ...ending,
    ...figures,
    message: optional(ending.message),
    resultText: optional(ending.resultText),
  };
}

/** Why a turn that ended did not finish, as its log says: turn.failed's error, turn.cancelled's reason. */
export function endingMessage(result: TurnResult): string | undefined {
  if (result.status === "failed") return dataOf("turn.failed", result.event.data)?.error.message ?? result.error;
  if (result.status === "cancelled") return dataOf("turn.cancelled", result.event.data)?.reason ?? "cancelled";
  return undefined;
}

/** How a turn that ended did, from its terminal event. */
export function endingOf(result: TurnResult): TurnEndingFields {
  return {
    status: result.status,
    outcome: outcomeOfTurn(result.status, result.errorKind),
    attempts: result.attempt,
    errorKind: result.errorKind,
    message: endingMessage(result),
    resultText: result.resultText,
  };
}

export interface BatchReport {
  /** The batch file as named on the command line. */
  file: string;
  startedAt: string;
  seconds: number;
  turns: BatchTurnResult[];
  outcome: Outcome;
  exitCode: number;
}

/**
 * The batch exits with its worst turn's code, worst first: 3 > 2 > 1 > 6 > 4 > 5 > 0.
 * - infrastructure (3) first: a broken Redis, fleet or API may be why other turns failed too, and
 *   the right move for the pipeline is to retry the whole job;
 * - usage (2) next: a turn the worker refused means the batch file itself needs fixing, and a retry
 *   would fail the same way;
 * - task failed (1) next: a verdict on the agent's work, which a reader must see before a timeout;
 * - over budget (6) next: the tenant's limits stopped it, which says nothing of the task but is
 *   definite, unlike a timeout;
 * - cancelled or timed out (4) last among failures: a limit or a person ended the turn, which says
 *   the least about the task, so any definite failure elsewhere outranks it;
 * - parked (5) only when no turn failed, was cancelled or timed out: a turn waiting for a person has
 *   not gone wrong, it is just not over (--exit-on-park).
 */
const SEVERITY: Readonly<Record<Outcome, number>> = {
  finished: 0,
  parked: 1,
  cancelled: 2,
  timed_out: 2,
  over_budget: 3,
  task_failed: 4,
  usage: 5,
  infrastructure: 6,
};

/** The worst of the turns' outcomes (an empty batch finished). */
export function worstOutcome(outcomes: readonly Outcome[]): Outcome {
  let worst: Outcome = "finished";
  for (const outcome of outcomes) if (SEVERITY[outcome] > SEVERITY[worst]) worst = outcome;
  return worst;
}

export function batchReport(file: string, startedAt: Date, turns: BatchTurnResult[]): BatchReport {
  const outcome = worstOutcome(turns.map((t) => t.outcome));
  const seconds = (Date.now() - startedAt.getTime()) / 1000;
  return { file, startedAt: startedAt.toISOString(), seconds, turns, outcome, exitCode: exitCodeOf(outcome) };
}

/** The command that shows a turn's run afterwards. */
export function replayCommand(session: string): string {
  return `turnstream replay ${session}`;
}

/** The command a report points a reader at for one case: its own, else the replay of its session. */
export function seeCommand(result: Pick<BatchTurnResult, "session" | "command">): string {
  return result.command ?? replayCommand(result.session);
}

/** How many turns ended each way, for headlines. */
export function countByStatus(turns: readonly BatchTurnResult[]): Record<TurnEnding, number> {
  const counts: Record<TurnEnding, number> = { finished: 0, failed: 0, cancelled: 0, unended: 0, parked: 0 };
  for (const turn of turns) counts[turn.status]++;
  return counts;
}

/** `12.3 s` style, for people. */
export function secondsText(seconds: number): string {
  return `${seconds.toFixed(1)} s`;
}
