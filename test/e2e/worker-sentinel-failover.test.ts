// A real Redis Sentinel failover under a running turn: Debian's redis-server (a primary, one replica)
// and redis-sentinel (three, quorum 2) on loopback; the worker and the producer connect through the
// sentinels (REDIS_URL=redis-sentinel://…); the real CLI runs a Bash tool chain against the scripted
// model server; the primary is killed -9 mid-turn and Sentinel promotes the replica.
// replicas:1: every batch acknowledged to the worker was on the replica, so the promoted log holds it
// (the writers' rollback check never fires) and the turn finishes exactly once, every seq once, every
// tool call paired with its result. memory: writes may be lost, but never silently: the turn either
// finishes with a log that has no hole, or its attempt is recorded rolled back and run again.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { connectRedis, createEventLog, type Envelope } from "../../src/log/index.ts";
import { createProducer } from "../../src/queue/index.ts";
import { startTurnWorker } from "../../src/worker/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { createLogger, createScrubber } from "../../src/telemetry/index.ts";
import { startSentinelRig } from "../support/sentinel.ts";
import {
  assertNoHole,
  cliEnv,
  readAll,
  testSpace,
  toolChain,
  waitForToolResults,
  waitUntil,
} from "../worker/_support.ts";

const STEPS = 10;

interface FailoverRun {
  events: Envelope[];
  end: Envelope;
  /** The replica's head when the primary was killed, and the primary's. */
  replicaHead: number;
  primaryHead: number;
  status: string;
}

/**
 * Runs the chain through a worker connected via Sentinel at `durability`, kills the primary mid-turn, and returns the
 * log the turn ended in.
 */
async function failoverTurn(testContext: TestContext, durability: string): Promise<FailoverRun> {
  const space = testSpace();
  const rig = await startSentinelRig();
  const onPrimary = new Redis(rig.primary.url, { maxRetriesPerRequest: 1 });
  const onReplica = new Redis(rig.replica.url);
  for (const connection of [onPrimary, onReplica]) connection.on("error", () => undefined);
  const server = await startModelServer({
    script: { responses: Array.from({ length: 4 }, () => toolChain("CHAIN", STEPS, { pauseS: 0.3 })).flat() },
  });
  const redis = connectRedis({ url: rig.url, env: {} });
  redis.on("error", () => undefined);
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix, durability });
  const primaryLog = createEventLog({ redis: onPrimary, prefix: space.logPrefix });
  const replicaLog = createEventLog({ redis: onReplica, prefix: space.logPrefix });
  const ws = space.workspace();
  const worker = startTurnWorker({
    redis,
    durability,
    logPrefix: space.logPrefix,
    queuePrefix: space.queuePrefix,
    workspaceRoots: [ws],
    instanceRoot: space.dir("inst"),
    runEnv: cliEnv(server.url),
    sandboxed: true,
    retry: { baseMs: 300, maxMs: 2000 },
    logger: process.env["DEBUG_FAILOVER"]
      ? createLogger({
          scrubber: createScrubber({ env: {} }),
          level: "info",
          destination: { write: (l: string) => void process.stderr.write(l) },
        })
      : undefined,
  });
  try {
    const turn = await producer.enqueueTurn({
      prompt: "CHAIN-START: run the steps",
      cwd: ws,
      options: { skipPermissions: true },
    });
    await waitForToolResults(primaryLog, turn.session, 3, "primary");
    const [primaryHead, replicaHead] = [
      (await primaryLog.stat(turn.session)).lastSeq,
      (await replicaLog.stat(turn.session)).lastSeq,
    ];
    const before = await rig.primaryAddress();
    await rig.primary.stop("SIGKILL");
    await waitUntil(
      async () => (await rig.primaryAddress()) === `127.0.0.1:${rig.replica.port}`,
      60000,
      "every sentinel to name the promoted replica",
    );
    testContext.diagnostic(
      `${durability}: primary ${before} killed at seq ${primaryHead} (replica at ${replicaHead}); promoted ${rig.replica.port}`,
    );
    // The old primary comes back empty, as a replica of the promoted one (so replicas:1 can be
    // confirmed again). Started as a primary, a sentinel that had not yet taken in the failover could
    // make the promoted replica its replica and so empty it: seen once on a loaded machine.
    await rig.primary.start(["--replicaof", "127.0.0.1", String(rig.replica.port)]);
    await waitUntil(
      async () => {
        const st = await replicaLog.stat(turn.session);
        return st.turn === turn.turn && (st.state === "finished" || st.state === "failed");
      },
      150000,
      "the turn to end on the promoted replica",
    ).catch(async (err: unknown) => {
      const seen = await readAll(replicaLog, turn.session).catch(() => []);
      testContext.diagnostic(
        `log: ${JSON.stringify(seen.map((e) => [e.seq, e.attempt, e.kind, e.kind === "attempt.abandoned" ? e.data : undefined]))}`,
      );
      throw err;
    });
    // The log says it ended; the job's completion follows once BullMQ's connections found the promoted
    // primary, which on a loaded machine can take as long as the election did.
    const result = await producer.waitForTurn(turn.turn, { timeoutMs: 120000 });
    const events = await readAll(replicaLog, turn.session);
    return { events, end: assertNoHole(events, turn.turn, STEPS), replicaHead, primaryHead, status: result.status };
  } finally {
    await worker.close({ graceMs: 1000 });
    await producer.close();
    redis.disconnect();
    onPrimary.disconnect();
    onReplica.disconnect();
    await server.close();
    await rig.dispose();
    space.cleanup();
  }
}

function abandonReasons(events: readonly Envelope[]): string[] {
  return events.filter((e) => e.kind === "attempt.abandoned").map((e) => (e.data as { reason: string }).reason);
}

test(
  "Sentinel failover with replicas:1: every acknowledged line is in the promoted log, the turn finishes exactly once",
  { timeout: 300_000 },
  async (testContext) => {
    const run = await failoverTurn(testContext, "replicas:1");
    const reasons = abandonReasons(run.events);
    testContext.diagnostic(`abandoned: ${JSON.stringify(reasons)}; ${run.events.length} events`);
    // A lost acknowledged write would have been found by the writer's claim (log_rolled_back).
    assert.ok(!reasons.includes("log_rolled_back"), `no acknowledged write was lost: ${JSON.stringify(reasons)}`);
    assert.equal(run.end.kind, "turn.finished", JSON.stringify(run.end.data));
    assert.equal(run.status, "finished");
    assert.ok(run.events.length >= run.replicaHead, "the promoted log kept what the replica held");
  },
);

test(
  "Sentinel failover with memory: lost writes are found, never a finished turn with a hole",
  { timeout: 300_000 },
  async (testContext) => {
    const run = await failoverTurn(testContext, "memory");
    const reasons = abandonReasons(run.events);
    testContext.diagnostic(
      `abandoned: ${JSON.stringify(reasons)}; lost at most ${run.primaryHead - run.replicaHead} events`,
    );
    if (run.end.kind === "turn.failed") assert.match((run.end.data as { errorKind: string }).errorKind, /^log_lost$/);
    else assert.equal(run.status, "finished");
  },
);
