// Attacks on the wake-ups of parked turns without a CLI: the wake list and the pending index are
// writable by the `operator` Redis role, so a forged item or entry may at most wake a parked turn
// early (it checks for itself whether it is answered), never move any other job. And the role's ACL:
// it may push wake-ups, nothing else on the queue's side.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { putPending, wakeKey, type PendingEntry } from "../../src/decisions/index.ts";
import type { TurnParkedData } from "../../src/events/index.ts";
import { silentLogger } from "../../src/kernel/index.ts";
import { connectRedis, createEventLog, type EventLog, type RedisClient } from "../../src/log/index.ts";
import type { Queue } from "bullmq";
import { closeTurnQueue, createTurnQueue, SessionOrder } from "../../src/queue/index.ts";
import { startParkedWaker, sweepParked } from "../../src/worker/parked-waker.ts";
import { startAclRedis } from "./_acl-redis.ts";
import { waitUntil } from "../worker/_support.ts";

const QUEUE = "turns";
const rand = (): string => randomBytes(6).toString("hex");
const turnId = (): string => `t_${rand()}${rand()}`;

/** The queue's jobs for `turns`, each waiting out a long delay as a parked turn's job does. */
async function delayedJobs(queue: Queue, turns: readonly string[]): Promise<void> {
  for (const turn of turns) await queue.add("turn", {}, { jobId: turn, delay: 600_000 });
}

/** Which of `turns` have had their job moved out of its delay. */
async function promotedOf(queue: Queue, turns: readonly string[]): Promise<string[]> {
  const moved: string[] = [];
  for (const turn of turns) if ((await queue.getJobState(turn)) !== "delayed") moved.push(turn);
  return moved;
}

/** A session whose turn `turn` has parked (its meta says so, as the log's append leaves it). */
async function parkedSession(log: EventLog, session: string, turn: string): Promise<number> {
  const { epoch, attempt } = await log.beginAttempt(session, turn);
  const parked: TurnParkedData = {
    attempt,
    requestId: `dr-${rand()}`,
    requestSeq: 1,
    tool: "Bash",
    toolUseId: `toolu_${rand()}`,
    inputDigest: "0".repeat(64),
    cliSessionId: rand(),
    deadline: new Date(Date.now() + 60_000).toISOString(),
    parks: 1,
    queue: QUEUE,
  };
  await log.append(session, epoch, [{ turn, attempt, kind: "turn.parked", data: parked }]);
  return epoch;
}

/** A session whose turn is running (never parked). */
async function runningSession(log: EventLog, session: string, turn: string): Promise<number> {
  return (await log.beginAttempt(session, turn)).epoch;
}

interface Space {
  redis: RedisClient;
  prefix: string;
  log: EventLog;
  queue: Queue;
  order: SessionOrder;
}

/** A private log prefix and queue on the local Redis, removed afterwards. */
async function withSpace(fn: (space: Space) => Promise<void>): Promise<void> {
  const redis = connectRedis({ redisOptions: { maxRetriesPerRequest: 2 } });
  const prefix = `tspark-${rand()}:`;
  const queuePrefix = `{tsparkq-${rand()}}`;
  const queue = createTurnQueue({ redis, queuePrefix, queueName: QUEUE });
  const order = new SessionOrder({ redis, logPrefix: prefix, queue });
  try {
    await fn({ redis, prefix, log: createEventLog({ redis, prefix }), queue, order });
  } finally {
    await closeTurnQueue(queue);
    for (const pattern of [`${prefix}*`, `${queuePrefix}*`]) {
      const keys = await redis.keys(pattern);
      if (keys.length > 0) await redis.del(...keys);
    }
    redis.disconnect();
  }
}

test("parked attack: forged wake-ups (malformed, another session's turn, a turn that is not parked, another queue) move no job", async () => {
  await withSpace(async ({ redis, prefix, log, queue, order }) => {
    const parked = { session: `s-${rand()}`, turn: turnId() };
    const running = { session: `s-${rand()}`, turn: turnId() };
    await parkedSession(log, parked.session, parked.turn);
    await runningSession(log, running.session, running.turn);
    const turns = [parked.turn, running.turn];
    await delayedJobs(queue, turns);
    const waker = startParkedWaker({ redis, order, prefix, queueName: QUEUE, sweepMs: 600_000, logger: silentLogger });
    try {
      const forged = [
        "",
        "garbage",
        parked.session,
        `${parked.session} ${parked.turn} extra`,
        `${parked.session}  ${parked.turn}`,
        `${running.session} ${running.turn}`,
        `${parked.session} ${running.turn}`,
        `${running.session} ${parked.turn}`,
        `../${parked.session} ${parked.turn}`,
        `${parked.session} ${parked.turn}\n`,
        `${parked.session} t_${"x".repeat(200)}`,
      ];
      // Another queue's list is not this worker's to read.
      await redis.lpush(wakeKey(prefix, "other"), `${parked.session} ${parked.turn}`);
      // The list is first in, first out: once the genuine wake-up is taken, every forged one was.
      await redis.lpush(wakeKey(prefix, QUEUE), ...forged, `${parked.session} ${parked.turn}`);
      await waitUntil(async () => (await promotedOf(queue, turns)).length > 0, 10_000, "the genuine wake-up");
      assert.equal(await redis.llen(wakeKey(prefix, QUEUE)), 0);
      assert.deepEqual(await promotedOf(queue, turns), [parked.turn], "only the parked turn's job moved");
    } finally {
      await waker.stop();
    }
  });
});

test("parked attack: forged pending entries make the sweep move no job but the session's parked turn", async () => {
  await withSpace(async ({ redis, prefix, log, queue, order }) => {
    const parked = { session: `s-${rand()}`, turn: turnId() };
    const running = { session: `s-${rand()}`, turn: turnId() };
    const epoch = await parkedSession(log, parked.session, parked.turn);
    const runningEpoch = await runningSession(log, running.session, running.turn);
    const base = (session: string, turn: string, entryEpoch: number): PendingEntry => ({
      session,
      requestId: `dr-${rand()}`,
      turn,
      attempt: 1,
      epoch: entryEpoch,
      seq: 1,
      tool: "Bash",
      riskClass: "exec",
      input: "echo",
      hubId: "hub-x",
      requestedAt: new Date().toISOString(),
      expiresAt: new Date(Date.now() + 60_000).toISOString(),
      // Marked decided: the sweep wakes it whatever the log says.
      parked: { queue: QUEUE, seq: 1, at: new Date().toISOString(), decided: true },
    });
    const otherTurn = turnId();
    // A parked session's entry naming another turn (any job of the queue: a retry's backoff, a turn
    // waiting behind its session's head), a running session's entry, another queue's entry.
    await putPending(redis, prefix, base(parked.session, otherTurn, epoch));
    await putPending(redis, prefix, base(running.session, running.turn, runningEpoch));
    await putPending(redis, prefix, { ...base(parked.session, parked.turn, epoch), parked: undefined });
    const elsewhere = base(parked.session, turnId(), epoch);
    await putPending(redis, prefix, { ...elsewhere, parked: { ...elsewhere.parked!, queue: "other" } });
    const others = [otherTurn, running.turn, elsewhere.turn];
    await delayedJobs(queue, others);
    await sweepParked({ redis, order, prefix, queueName: QUEUE, sweepMs: 1000, logger: silentLogger });
    assert.deepEqual(await promotedOf(queue, others), [], "the sweep promoted a job that is not the parked turn");
  });
});

test("parked attack: the operator role may push wake-ups but not touch the queue's jobs, nor take or drop wake-ups", async (ctx) => {
  const prefixes = { logPrefix: `tspark${rand()}:`, queuePrefix: `{tsparkq${rand()}}` };
  const acl = await startAclRedis(prefixes);
  ctx.after(() => acl.close());
  const operator = acl.client("operator");
  const wake = wakeKey(prefixes.logPrefix, QUEUE);
  assert.equal(await operator.lpush(wake, "s-1 t_aaaaaaaaaa"), 1, "the role pushes a wake-up");
  const queueKey = (name: string) => `${prefixes.queuePrefix}:${QUEUE}:${name}`;
  const refused: Array<[string, () => Promise<unknown>]> = [
    ["take a wake-up", () => operator.rpop(wake)],
    ["drop the wake list", () => operator.del(wake)],
    ["trim the wake list", () => operator.ltrim(wake, 1, 0)],
    ["push onto the queue's wait list", () => operator.lpush(queueKey("wait"), "job")],
    ["schedule a delayed job", () => operator.zadd(queueKey("delayed"), 0, "job")],
    ["mark a job", () => operator.hset(queueKey("t_aaaaaaaaaa"), "delay", "0")],
    ["push through a script", () => operator.eval("return redis.call('lpush', KEYS[1], 'job')", 1, queueKey("wait"))],
    [
      "push to a key that only starts like a wake list",
      () => operator.lpush(`${prefixes.logPrefix}decisions:wakeup`, "x"),
    ],
  ];
  for (const [what, attempt] of refused) await assert.rejects(attempt, /NOPERM/, `the operator role could ${what}`);
});
