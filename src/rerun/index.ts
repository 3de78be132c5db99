// Record and re-run: a logged turn as a model-server script, and two runs' events compared.
export { recordedTurns, NoRecordedTurnError, type RecordedTurn, type TurnEnding, type TurnStatus } from "./record.ts";
export { responsesOfTurn, scriptFromTurns, type ScriptOptions } from "./script.ts";
export {
  compareRuns,
  compareTurn,
  renderComparison,
  runSteps,
  type Difference,
  type RerunComparison,
  type RunStep,
  type TurnComparison,
} from "./compare.ts";
export {
  RecordingRefusedError,
  refusalOf,
  RERUN_PERMISSION_MODES,
  type RerunGrant,
  type RerunPermissionMode,
} from "./trust.ts";
