import { createHash, randomBytes } from "node:crypto";

function hash(text: string, chars: number): string {
  return createHash("sha256")
    .update(text)
    .digest("base64url")
    .replace(/[^A-Za-z0-9]/g, "x")
    .slice(0, chars);
}

/** A turn id, derived from the idempotency key when there is one (so the BullMQ jobId dedupes). */
export function turnId(session: string, idempotencyKey: string | undefined): string {
  if (idempotencyKey !== undefined) return `t_${hash(`${session}\u0000${idempotencyKey}`, 22)}`;
  return `t_${randomBytes(16)
    .toString("base64url")
    .replace(/[^A-Za-z0-9]/g, "x")
    .slice(0, 22)}`;
}

/** A session id; with an idempotency key and no session, derived from the key. */
export function sessionId(idempotencyKey: string | undefined): string {
  if (idempotencyKey !== undefined) return `s-${hash(`session\u0000${idempotencyKey}`, 20)}`;
  return `s-${randomBytes(12)
    .toString("base64url")
    .replace(/[^A-Za-z0-9]/g, "x")
    .slice(0, 16)}`;
}

/** Writer id for the producer's one-batch append of a turn's turn.queued (so a re-send dedupes). */
export function queuedWriter(turn: string): string {
  return `q-${turn}`;
}
