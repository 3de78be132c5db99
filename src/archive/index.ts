// Public surface of the archive.
export type {
  Archive,
  ArchivedListing,
  ArchivedRecord,
  ArchiveReadOptions,
  ArchivedSummary,
  ArchiveSummariesOptions,
  LogDigest,
  SessionCopy,
  SessionState,
} from "./archive.ts";
export { archivedRow, byRecentActivity } from "./listing.ts";
export { DigestBuilder, envelopeLine, extendsDigest, logDigest, sameDigest } from "./digest.ts";
export { summarize, summaryOfState } from "./summary.ts";
export { FileArchive, FILE_SUFFIX, type FileArchiveOptions } from "./file.ts";
export {
  ArchiveConflictError,
  ArchiveCopyTooLargeError,
  ArchiveCorruptError,
  InvalidArchiveListingError,
  InvalidArchiveUrlError,
  InvalidSessionCopyError,
} from "./errors.ts";
export { DEFAULT_SCHEMA, PostgresArchive, type PostgresArchiveOptions } from "./postgres.ts";
export { archiveUrlForDisplay, openArchive } from "./open.ts";
export { decisionRows, toolCallRows, type DecisionRow, type ToolCallRow } from "./derive.ts";
export { SessionHistory, sessionEvents, type SessionHome } from "./source.ts";
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
