// Public surface of the archive.
export type { Archive, ArchiveReadOptions, ArchivedSummary, LogDigest, SessionCopy, SessionState } from "./archive.ts";
export { copyOfSession, sessionState } from "./copy.ts";
export {
  runRetention,
  type RetentionAction,
  type RetentionEntry,
  type RetentionOptions,
  type RetentionReport,
  type RetentionStep,
} from "./retention.ts";
export { archiveRestorer, restoreSession, RestoreRefusedError, type RestoreOutcome } from "./restore.ts";
