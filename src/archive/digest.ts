// The one definition of a log's digest: SHA-256 over each envelope's JSON (`JSON.stringify`, the text
// an export and both stores write) in seq order, joined by "\n"; with the count and the last seq. A
// store recomputes it from the text it holds, so any edit of a stored line changes the digest.
import { createHash, type Hash } from "node:crypto";
import type { Envelope } from "../log/index.ts";
import type { LogDigest, SessionCopy } from "./archive.ts";
import { ArchiveConflictError } from "./errors.ts";

/** The text an envelope is archived and digested as. */
export function envelopeLine(envelope: Envelope): string {
  return JSON.stringify(envelope);
}

/**
 * The seq a stored line claims, without parsing it (the log's key order puts it right after `v`), for
 * a digest of text that may have been edited; 0 when it claims none.
 */
export function claimedSeq(text: string): number {
  const match = /^\{"v":1,"seq":(\d{1,15}),/.exec(text);
  return match === null ? 0 : Number(match[1]);
}

/** Builds a digest line by line, for stores that read their lines back as a stream. */
export class DigestBuilder {
  readonly #hash: Hash = createHash("sha256");
  #count = 0;
  #lastSeq = 0;

  /** Adds the next line (in seq order) and the seq it holds. */
  add(line: string, seq: number): void {
    if (this.#count > 0) this.#hash.update("\n");
    this.#hash.update(line, "utf8");
    this.#count++;
    this.#lastSeq = seq;
  }

  get count(): number {
    return this.#count;
  }

  digest(): LogDigest {
    return { count: this.#count, lastSeq: this.#lastSeq, sha256: this.#hash.copy().digest("hex") };
  }
}

/**
 * The digest of lines held as one UTF-8 text, joined by "\n" as DigestBuilder joins them: what
 * DigestBuilder gives for those lines, hashed in one call (a store that reads its whole copy at once).
 */
export function joinedLinesDigest(joined: Uint8Array, count: number, lastSeq: number): LogDigest {
  return { count, lastSeq, sha256: createHash("sha256").update(joined).digest("hex") };
}

/** The digest of a session's events (sorted by seq first; the caller's array is left as it is). */
export function logDigest(events: Iterable<Envelope>): LogDigest {
  const sorted = [...events].sort((left, right) => left.seq - right.seq);
  const builder = new DigestBuilder();
  for (const envelope of sorted) builder.add(envelopeLine(envelope), envelope.seq);
  return builder.digest();
}

/** A digest as messages show it. */
export function describeDigest(digest: LogDigest): string {
  return `${digest.count} events to seq ${digest.lastSeq}, sha256 ${digest.sha256.slice(0, 12)}…`;
}

/** A copy refused because the store holds a different history of its session (or, mid-race, none). */
export function putConflict(session: string, stored: LogDigest | undefined, given: LogDigest): ArchiveConflictError {
  const held = stored === undefined ? "nothing" : describeDigest(stored);
  return new ArchiveConflictError(session, `stored: ${held}; given: ${describeDigest(given)}`);
}

/**
 * Whether a put of `copy` writes, given the digest the store holds: a new session's copy or one that
 * extends the stored history (the session went on after a restore) is written, the same copy again
 * is a no-op, any other history is refused (ArchiveConflictError). The one rule both stores keep.
 */
export function putWrites(stored: LogDigest | undefined, copy: SessionCopy): boolean {
  if (stored === undefined) return true;
  if (sameDigest(stored, copy.digest)) return false;
  if (extendsDigest(copy.events, stored)) return true;
  throw putConflict(copy.session, stored, copy.digest);
}

export function sameDigest(left: LogDigest, right: LogDigest): boolean {
  return left.count === right.count && left.lastSeq === right.lastSeq && left.sha256 === right.sha256;
}

/**
 * Whether `events` (a full copy, in seq order) extends the history `stored` describes: its first
 * `stored.count` events digest to exactly `stored`, and it holds more.
 */
export function extendsDigest(events: readonly Envelope[], stored: LogDigest): boolean {
  if (events.length <= stored.count) return false;
  return sameDigest(logDigest(events.slice(0, stored.count)), stored);
}
