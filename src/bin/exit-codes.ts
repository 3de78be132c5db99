// The exit codes of every `turnstream` command, so a CI pipeline can tell "the agent failed the task"
// (do not retry; look at the transcript) from "retry this job" (infrastructure). The codes and the
// outcome of each failure kind live in the failure table (src/events/failures.ts), which a library
// user reads through `outcomeOf`; the README's CLI reference has the same table, and
// test/bin/exit-codes.test.ts holds them together.
import { EXIT_CODE_OF_OUTCOME, outcomeOf, type ExitCode, type Outcome } from "../events/index.ts";

export {
  EXIT,
  EXIT_CODE_OF_OUTCOME,
  EXIT_ON_SIGNAL,
  outcomeOfErrorKind,
  type Outcome,
  type StopSignal,
} from "../events/index.ts";

/** The outcome of a turn's terminal status (turn.finished / turn.failed / turn.cancelled). */
export function outcomeOfTurn(status: "finished" | "failed" | "cancelled", errorKind: string | undefined): Outcome {
  return outcomeOf({ status, errorKind }).outcome;
}

export function exitCodeOf(outcome: Outcome): ExitCode {
  return EXIT_CODE_OF_OUTCOME[outcome];
}
