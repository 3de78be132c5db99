// The event vocabulary: every kind turnstream writes to a session's log, the schema of its data, the
// sets of kinds readers branch on, the failure kinds a turn can end with (whether each is retried, its
// outcome and exit code), and the observer interface through which the worker shows its
// events to spans and metrics as it writes them. Producer, worker and hub write through these types;
// projector, spans, log scans, tail and replay read through `dataOf`.
export * from "./schemas.ts";
export {
  ATTEMPT_END_KINDS,
  currentKind,
  isTerminalKind,
  KIND_PATTERN,
  RENAMED_KINDS,
  TERMINAL_KINDS,
  TURN_KINDS,
} from "./kinds.ts";
export { dataOf, isEventKind } from "./data.ts";
export { costAdded } from "./cost.ts";
export type { AttemptContext, AttemptObserver, EventObserver, ObservedEvent } from "./observer.ts";
export {
  ERROR_KINDS,
  EXIT,
  EXIT_CODE_OF_OUTCOME,
  EXIT_ON_SIGNAL,
  FAILURE_KINDS,
  FAILURE_KINDS_TABLE,
  failureKindSchema,
  isFailureKind,
  isRetryableKind,
  LEGACY_FAILURE_KINDS,
  outcomeOf,
  outcomeOfErrorKind,
  OUTCOME_MEANINGS,
  STOP_SIGNAL_MEANINGS,
  type ExitCode,
  type FailureKind,
  type FailureKindInfo,
  type KnownErrorKind,
  type Outcome,
  type StopSignal,
  type TurnEnding,
  type TurnVerdict,
} from "./failures.ts";
