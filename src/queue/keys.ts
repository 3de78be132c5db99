// Key layout of the queue. BullMQ's keys all carry one hash tag (its prefix, default `{turnstream}`)
// so its multi-key scripts work on Redis Cluster; the per-session ordering keys carry the session's
// own tag `{s:<id>}`, the same slot as the session's event log, so one script can check order and
// lease together.
import { sessionTag } from "../log/index.ts";

export const DEFAULT_QUEUE_NAME = "turns";
export const DEFAULT_QUEUE_PREFIX = "{turnstream}";

const QUEUE_PREFIX = /^\{[A-Za-z0-9_.:-]{1,64}\}$/;

export function assertQueuePrefix(prefix: string): void {
  if (typeof prefix !== "string" || !QUEUE_PREFIX.test(prefix)) {
    throw new Error(
      `queue prefix ${JSON.stringify(String(prefix).slice(0, 40))} must be one cluster hash tag like {turnstream} ` +
        `(1-64 characters from A-Z a-z 0-9 _ . : - inside braces)`,
    );
  }
}

export interface OrderKeys {
  /** List of the session's pending turn ids, in enqueue order; the head is the one allowed to run. */
  readonly turns: string;
  /** Hash turn id → enqueue time (ms): every turn ever registered, so an idempotent re-enqueue is a no-op. */
  readonly registered: string;
  /** The session lease: a token, SET NX PX, renewed while an attempt runs. */
  readonly lease: string;
  /** Set of turn ids whose cancellation was asked for. */
  readonly cancel: string;
  /** Hash of session settings fixed when the session is created (onLostSession). */
  readonly conf: string;
  /** Set of turn ids whose job waits out a delay because another turn was the head: the ones to wake. */
  readonly deferred: string;
  /** String: the worker holding the session's warm CLI process, for a short hand-off window after its turn. */
  readonly warm: string;
}

export function orderKeys(logPrefix: string, session: string): OrderKeys {
  const tag = sessionTag(logPrefix, session);
  return {
    turns: `${tag}:turns`,
    registered: `${tag}:registered`,
    lease: `${tag}:lease`,
    cancel: `${tag}:cancel`,
    conf: `${tag}:conf`,
    deferred: `${tag}:deferred`,
    warm: `${tag}:warm`,
  };
}
