// Key layout. Every key of one session carries the hash tag `{s:<id>}` so that the stream, the meta
// hash and the blobs live in one Redis Cluster slot and one Lua script may touch them all. A global
// prefix goes before the tag (never inside it) so tests and tenants can isolate without moving slots.
import { DEFAULT_PREFIX } from "../kernel/index.ts";
import { InvalidPrefixError, InvalidSessionIdError } from "./errors.ts";

export { DEFAULT_PREFIX };

export const SESSION_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const PREFIX_PATTERN = /^[A-Za-z0-9_.:-]{0,64}$/;

export function isValidSessionId(id: string): boolean {
  return SESSION_ID_PATTERN.test(id);
}

export function assertSessionId(id: string): void {
  if (typeof id !== "string" || !SESSION_ID_PATTERN.test(id)) throw new InvalidSessionIdError(String(id));
}

export function assertPrefix(prefix: string): void {
  if (typeof prefix !== "string" || !PREFIX_PATTERN.test(prefix)) throw new InvalidPrefixError(String(prefix));
}

export interface SessionKeys {
  readonly events: string;
  readonly meta: string;
  /** Set of the blob key names this session references (so retention can expire them with the rest). */
  readonly blobs: string;
  blob(sha256: string): string;
}

/**
 * What every key of one session starts with, `<prefix>{s:<id>}`: the hash tag that puts the log, the
 * queue's order keys and the read models of a session in one Redis Cluster slot.
 */
export function sessionTag(prefix: string, session: string): string {
  assertSessionId(session);
  return `${prefix}{s:${session}}`;
}

export function sessionKeys(prefix: string, session: string): SessionKeys {
  const tag = sessionTag(prefix, session);
  return {
    events: `${tag}:events`,
    meta: `${tag}:meta`,
    blobs: `${tag}:blobs`,
    blob: (sha256: string) => `${tag}:blob:${sha256}`,
  };
}

/** The session index: a sorted set of session ids by last append time. A hint, not the truth. */
export function indexKey(prefix: string): string {
  return `${prefix}sessions`;
}

export function streamId(seq: number): string {
  return `0-${seq}`;
}

export function seqOfId(id: string): number {
  const dash = id.indexOf("-");
  return Number(id.slice(dash + 1));
}
