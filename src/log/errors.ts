// Typed errors of the event log. Messages say what to change; they never carry event payloads.
import { TurnstreamError } from "../kernel/index.ts";

export class InvalidSessionIdError extends TurnstreamError {
  readonly session: string;
  constructor(session: string) {
    super(
      `session id ${JSON.stringify(session.slice(0, 40))} is invalid: use 1-128 characters from ` +
        `A-Z a-z 0-9 _ . - (no braces, colons or spaces), starting with a letter or digit`,
      { code: "invalid_session_id" },
    );
    this.session = session.slice(0, 128);
  }
}

export class InvalidPrefixError extends TurnstreamError {
  readonly prefix: string;
  constructor(prefix: string) {
    super(
      `key prefix ${JSON.stringify(prefix.slice(0, 40))} is invalid: use at most 64 characters from ` +
        `A-Z a-z 0-9 _ . : - (braces would change the cluster hash tag)`,
      { code: "invalid_prefix" },
    );
    this.prefix = prefix.slice(0, 64);
  }
}

/** An event failed the envelope schema (on write: nothing was appended; on read: the stored entry is corrupt). */
export class InvalidEventError extends TurnstreamError {
  readonly session: string;
  readonly seq: number | undefined;
  readonly issues: readonly string[];
  constructor(session: string, seq: number | undefined, issues: readonly string[]) {
    super(
      `event ${seq === undefined ? "" : `#${seq} `}of session ${session} does not match the envelope schema: ` +
        issues.slice(0, 3).join("; "),
      { code: "invalid_event" },
    );
    this.session = session;
    this.seq = seq;
    this.issues = issues;
  }
}

/**
 * The append carried an epoch that is no longer the session's current one: another attempt has
 * begun since. The writer holding this epoch is stale and must stop (kill its CLI); nothing of the
 * rejected batch was written.
 */
export class FencedError extends TurnstreamError {
  readonly session: string;
  readonly epoch: number;
  readonly currentEpoch: number;
  constructor(session: string, epoch: number, currentEpoch: number) {
    super(
      `session ${session}: epoch ${epoch} is fenced (current epoch ${currentEpoch}); this attempt was ` +
        `superseded — stop writing and end the attempt's process`,
      { code: "fenced" },
    );
    this.session = session;
    this.epoch = epoch;
    this.currentEpoch = currentEpoch;
  }
}

/** `expectedSeq` did not match the log's last sequence number; nothing was written. */
export class ConflictError extends TurnstreamError {
  readonly session: string;
  readonly expectedSeq: number;
  readonly lastSeq: number;
  constructor(session: string, expectedSeq: number, lastSeq: number) {
    super(
      `session ${session}: expected last seq ${expectedSeq} but the log is at ${lastSeq}; re-read the ` +
        `log and retry with the current seq`,
      { code: "conflict" },
    );
    this.session = session;
    this.expectedSeq = expectedSeq;
    this.lastSeq = lastSeq;
  }
}

/**
 * The log is behind what this writer was acknowledged: Redis lost writes it had confirmed (a failover
 * to a replica that had not received them, or a restart without its data). Nothing of the rejected
 * batch was written; the writer must stop, since everything it appends would follow a hole.
 */
export class LogRolledBackError extends TurnstreamError {
  readonly session: string;
  /** The highest seq the writer had been told was in the log. */
  readonly ackedSeq: number;
  /** The log's real last seq now. */
  readonly lastSeq: number;
  constructor(session: string, ackedSeq: number, lastSeq: number) {
    super(
      `session ${session}: the event log lost acknowledged writes (it is at seq ${lastSeq}, but seq ` +
        `${ackedSeq} had been confirmed, or this writer's confirmed batch is gone): Redis failed over to a ` +
        `replica that had not received them, or restarted without its data; check the Redis ` +
        `replication and persistence settings (appendonly, min-replicas-to-write)`,
      { code: "log_rolled_back" },
    );
    this.session = session;
    this.ackedSeq = ackedSeq;
    this.lastSeq = lastSeq;
  }
}

/** A kind that needs a fencing epoch was given to an unfenced append. */
export class UnfencedKindError extends TurnstreamError {
  readonly kind: string;
  constructor(kind: string, allowed: readonly string[]) {
    super(
      `kind ${kind} cannot be appended without an epoch; begin an attempt and append with its epoch, ` +
        `or use one of the unfenced kinds: ${allowed.join(", ")}`,
      { code: "unfenced_kind" },
    );
    this.kind = kind;
  }
}

/** The writer was closed; no more events are accepted. */
export class WriterClosedError extends TurnstreamError {
  readonly session: string;
  constructor(session: string) {
    super(`writer for session ${session} is closed; create a new writer to append more events`, {
      code: "writer_closed",
    });
    this.session = session;
  }
}
