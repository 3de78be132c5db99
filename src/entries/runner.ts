// "turnstream/runner": one Claude Code CLI turn in this process, thread sessions across turns, config
// homes and skills, session files, process containment and the sweep of what runs leave behind. For
// embedding a turn without a queue: this entry loads no Redis client, queue or tracing SDK
// (test/package/light-entries.test.ts holds it to that).
export {
  captureSessionFile,
  ClaudeCodeCliError,
  CliNotFoundError,
  ContainmentError,
  InMemorySessionStore,
  LimitExceededError,
  LostSessionError,
  NoAuthError,
  restoreSessionFile,
  resolveClaudeBin,
  runThreadTurn,
  runTurn,
  sweep,
  WorkspacePathError,
  type CliErrorKind,
  type ConfigHomeOptions,
  type FreshReason,
  type Logger,
  type RunTurnOptions,
  type SessionStore,
  type SkillSpec,
  type StoredSession,
  type SweepOptions,
  type SweepResult,
  type ThreadTurnHandle,
  type ThreadTurnOptions,
  type ThreadTurnOutcome,
  type TurnHandle,
  type TurnOutcome,
  type WorkspacePathProblem,
} from "../runner/index.ts";

// How a run or turn ended, as the `turnstream` command judges it, and the one base of turnstream's errors.
export {
  FAILURE_KINDS_TABLE,
  outcomeOf,
  type ExitCode,
  type FailureKind,
  type FailureKindInfo,
  type KnownErrorKind,
  type Outcome,
  type TurnEnding,
  type TurnVerdict,
} from "../events/index.ts";
export { TurnstreamError, type TurnstreamErrorOptions } from "../kernel/index.ts";
