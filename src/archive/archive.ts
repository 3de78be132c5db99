// The archive: where a session's whole history goes before retention removes it from Redis, and where
// every reader finds it afterwards. Two stores keep the same contract: PostgreSQL for a fleet, a
// folder of gzip JSONL files for one machine. What an archive holds is read back as untrusted input
// (a row or a file can be edited by whoever reaches the store): every envelope is checked again.
import type { Envelope } from "../log/index.ts";
import type { ArchiveCorruptError } from "./errors.ts";

/** What identifies a session's log: how many events, the last seq, and a SHA-256 over them in order. */
export interface LogDigest {
  count: number;
  lastSeq: number;
  sha256: string;
}

/**
 * The Redis-side state of a session that is not in its events and must come back when the session
 * is restored: the log's meta hash, the queue's session settings (`:conf`) and every turn id ever
 * registered (`:registered`, so an enqueue repeated after a restore stays a no-op).
 */
export interface SessionState {
  meta: Record<string, string>;
  conf: Record<string, string>;
  registered: Record<string, string>;
}

/** The summary row of a session: the figures fleet questions are asked of. */
export interface ArchivedSummary {
  session: string;
  status: string;
  turns: number;
  attempts: number;
  costUsd: number;
  tokens: { input: number; output: number; cacheRead: number; cacheCreation: number };
  model: string | null;
  cwd: string | null;
  labels: Record<string, string>;
  /** Whose session it is (null: none, also for copies stored before it was kept). */
  tenant: string | null;
  firstAt: string | null;
  lastAt: string | null;
  lastSeq: number;
  /** Error kind → how many turns or attempts ended in it. */
  errorKinds: Record<string, number>;
  decisions: { allowed: number; denied: number; pending: number };
  /** The error kind the session's last failure ended in, or null (also for copies stored before it was kept). */
  lastErrorKind: string | null;
}

/** What a listing shows of an archived session, read without its events. */
export interface ArchivedListing {
  summary: ArchivedSummary;
  /** When `turnstream import` loaded the session (its archived meta says so), or null. */
  importedAt: string | null;
}

export interface ArchiveSummariesOptions {
  /** Most sessions listed (default all). */
  limit?: number | undefined;
  /** Only sessions last active strictly before this time (ISO): the next page after a listing's last lastAt. */
  before?: string | undefined;
  /** Only sessions of this tenant. */
  tenant?: string | undefined;
  /**
   * Told of each stored summary that fails its check (an edited row or file): it is left out of the
   * listing rather than shown or failing the whole list. Without it such an entry throws.
   */
  onCorrupt?: ((error: ArchiveCorruptError) => void) | undefined;
}

/** One session as it is archived: every event from seq 1 (blobs inlined), its state, summary and digest. */
export interface SessionCopy {
  session: string;
  events: readonly Envelope[];
  state: SessionState;
  summary: ArchivedSummary;
  digest: LogDigest;
}

/** What an archive keeps of a session beside its events. */
export interface ArchivedRecord {
  state: SessionState;
  summary: ArchivedSummary;
}

export interface ArchiveReadOptions {
  /** The first seq to read (default 1). */
  fromSeq?: number | undefined;
  /** The last seq to read (default the last archived). */
  toSeq?: number | undefined;
}

export interface Archive {
  /** Where the archive is, without a password: for messages and logs. */
  readonly location: string;
  /** Creates or upgrades the store's schema; says which migrations it applied. */
  migrate(): Promise<{ applied: string[] }>;
  /**
   * Stores a session's copy in one step. Idempotent: the same digest again is a no-op. A copy with a
   * different digest replaces the stored one only when it extends it (the session went on after a
   * restore); otherwise it is refused with ArchiveConflictError.
   */
  put(copy: SessionCopy): Promise<void>;
  /** The digest of what the store holds, computed from what it reads back, or undefined. */
  digest(session: string): Promise<LogDigest | undefined>;
  /** The archived events in seq order (checked as envelopes of this session). */
  read(session: string, options?: ArchiveReadOptions): AsyncGenerator<Envelope>;
  state(session: string): Promise<SessionState | undefined>;
  summary(session: string): Promise<ArchivedSummary | undefined>;
  /** An archived session's state and summary in one read of the store, or undefined when it holds no copy. */
  record(session: string): Promise<ArchivedRecord | undefined>;
  /**
   * Archived sessions' summaries without reading their copies, most recently active first (by
   * lastAt; sessions without one last, ties by id), each checked as the summary row's shape.
   */
  summaries(options?: ArchiveSummariesOptions): Promise<ArchivedListing[]>;
  /** Archived session ids. */
  sessions(): AsyncGenerator<string>;
  /** Keeps a live session's summary row current (the projector's read model); no-op for stores without SQL. */
  upsertSummary(summary: ArchivedSummary): Promise<void>;
  close(): Promise<void>;
}
