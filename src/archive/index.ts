// Public surface of the archive.
export type { Archive, ArchiveReadOptions, ArchivedSummary, LogDigest, SessionCopy, SessionState } from "./archive.ts";
