// Waking parked turns. A parked turn's job waits out a delay until its request's deadline; a decision
// should resume it at once. `decide` pushes `<session> <turn>` onto the queue's wake list and this
// worker, blocked on that list on a connection of its own, promotes the turn's job. Wake-ups can be
// lost (a worker that took one died), and a trust rule added later wakes nobody, so every few seconds
// the worker also looks over the parked entries of its queue and wakes those with something new: a
// decision, anything appended to their session, or a rule added since they parked. A woken job checks
// for itself whether its request is answered, and goes back to waiting if not (execute.ts).
import { readPendingEntries, RuleStore, wakeKey, type PendingEntry } from "../decisions/index.ts";
import type { Logger } from "../kernel/index.ts";
import { SESSION_ID_PATTERN, sessionKeys, type RedisClient } from "../log/index.ts";
import { TURN_ID_PATTERN, type SessionOrder } from "../queue/index.ts";

export interface ParkedWaker {
  /**
   * Stops taking wake-ups and sweeping and drops the blocking connection, without waiting for it: a
   * shutdown while Redis is unreachable must not wait on a blocked read.
   */
  stop(): void;
}

export interface ParkedWakerOptions {
  redis: RedisClient;
  order: SessionOrder;
  prefix: string;
  queueName: string;
  sweepMs: number;
  logger: Logger;
}

// A blocked read returns this often even with no wake-up, so stop() never waits long.
const BLOCK_SECONDS = 2;

export function startParkedWaker(options: ParkedWakerOptions): ParkedWaker {
  const { logger } = options;
  let stopped = false;
  const blocking = options.redis.duplicate();
  blocking.on("error", () => undefined); // the loop below reports what matters
  void (async () => {
    while (!stopped) {
      try {
        const item = await blocking.brpop(wakeKey(options.prefix, options.queueName), BLOCK_SECONDS);
        if (item !== null) await wakeOne(options, item[1]);
      } catch (err) {
        if (stopped) break;
        logger.warn({ err: { message: (err as Error).message } }, "parked-turn wake-ups: read failed; retrying");
        await new Promise((resolve) => setTimeout(resolve, 1000).unref());
      }
    }
  })();
  const sweep = setInterval(() => {
    void sweepParked(options).catch((err: unknown) =>
      logger.warn({ err: { message: (err as Error).message } }, "parked-turn sweep failed"),
    );
  }, options.sweepMs);
  sweep.unref();
  return {
    stop() {
      stopped = true;
      clearInterval(sweep);
      blocking.disconnect();
    },
  };
}

/** Promotes the job of a turn a wake-up names, when its session says that turn is parked. */
async function wakeOne(options: ParkedWakerOptions, item: string): Promise<void> {
  const [session, turn, ...rest] = item.split(" ");
  // The list is writable by operators: only a well-formed wake-up of a parked turn moves a job.
  if (session === undefined || turn === undefined || rest.length > 0) return;
  if (!SESSION_ID_PATTERN.test(session) || !TURN_ID_PATTERN.test(turn)) return;
  const [state, parkedTurn] = await options.redis.hmget(
    sessionKeys(options.prefix, session).meta,
    "state",
    "parkedTurn",
  );
  if (state === "parked" && parkedTurn === turn) await options.order.promote(turn);
}

/** Wakes this queue's parked turns that have something new since they last parked or were looked at. */
export async function sweepParked(options: ParkedWakerOptions): Promise<number> {
  const { redis, prefix } = options;
  const parked = (await readPendingEntries(redis, prefix)).filter((e) => e.parked?.queue === options.queueName);
  if (parked.length === 0) return 0;
  const rules = await new RuleStore(redis, prefix).list();
  const newestRule = rules.reduce((latest, rule) => (rule.at > latest ? rule.at : latest), "");
  let woken = 0;
  for (const entry of parked) {
    const meta = sessionKeys(prefix, entry.session).meta;
    const [state, seq, epoch, parkedTurn] = await redis.hmget(meta, "state", "seq", "epoch", "parkedTurn");
    // The index is writable by operators: only the turn the session's meta says is parked is woken.
    if (state !== "parked" || Number(epoch) !== entry.epoch || parkedTurn !== entry.turn) continue;
    if (!hasNews(entry, Number(seq), newestRule)) continue;
    await options.order.promote(entry.turn);
    woken++;
  }
  return woken;
}

function hasNews(entry: PendingEntry, seq: number, newestRule: string): boolean {
  const parked = entry.parked!;
  return (
    parked.decided === true || seq > parked.seq || newestRule > parked.at || Date.parse(entry.expiresAt) <= Date.now()
  );
}
