// `npm run bench -- parked-failover`: a parked turn across a real Redis Sentinel failover. The turn
// parks on a worker that acknowledges appends at replicas:1, the primary is killed -9 while it waits,
// Sentinel promotes the replica, and a decision made afterwards resumes it: what parking recorded (the
// session file, turn.parked, the request) was on the replica, and the call runs once. A soak check,
// not part of `npm test`: on a loaded machine its failover waits outlast the suite's per-test bound.
// Exits non-zero when the turn does not come through once; the last line is its JSON.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Redis } from "ioredis";
import { decide, listPending, parseOperatorKeys, type PendingRequest } from "../src/decisions/index.ts";
import { connectRedis, createEventLog } from "../src/log/index.ts";
import { createProducer } from "../src/queue/index.ts";
import { startModelServer } from "../src/testing/index.ts";
import { startTurnWorker } from "../src/worker/index.ts";
import { OPERATOR, operatorKey } from "../test/decisions/_support.ts";
import { startSentinelRig } from "../test/support/sentinel.ts";
import { cliEnv, testSpace, waitUntil } from "../test/worker/_support.ts";

const since = (start: number): number => Date.now() - start;

/** Runs the scenario; throws (an assertion) when the parked turn does not come through once. */
async function parkedFailover(): Promise<Record<string, number>> {
  const space = testSpace();
  const ws = space.workspace();
  const ran = join(ws, "ran.txt");
  const rig = await startSentinelRig();
  const server = await startModelServer({
    script: {
      responses: [
        { content: [{ type: "tool_use", name: "Bash", input: { command: `echo once >> ${ran}` } }] },
        { content: [{ type: "text", text: "done" }] },
      ],
    },
  });
  const redis = connectRedis({ url: rig.url, env: {} });
  redis.on("error", () => undefined);
  const onReplica = new Redis(rig.replica.url);
  onReplica.on("error", () => undefined);
  const durability = "replicas:1";
  const { logPrefix, queuePrefix } = space;
  const producer = createProducer({ redis, logPrefix, queuePrefix, durability });
  const worker = startTurnWorker({
    redis,
    durability,
    logPrefix,
    queuePrefix,
    workspaceRoots: [ws],
    instanceRoot: space.dir("inst"),
    runEnv: cliEnv(server.url),
    operatorKeys: [OPERATOR.publicKey],
    parking: { answerWindowMs: 300, sweepMs: 500 },
  });
  const cleanup = async (): Promise<void> => {
    await worker.close({ graceMs: 1000 });
    await producer.close();
    redis.disconnect();
    onReplica.disconnect();
    await server.close();
    await rig.dispose();
    space.cleanup();
  };
  try {
    const started = Date.now();
    const { session, turn } = await producer.enqueueTurn({ prompt: "append", cwd: ws, options: { supervised: true } });
    const replicaLog = createEventLog({ redis: onReplica, prefix: logPrefix });
    await waitUntil(
      async () => (await replicaLog.stat(session)).state === "parked",
      60_000,
      "the replica to hold the park",
    );

    const parkedMs = since(started);
    const killedAt = Date.now();
    await rig.primary.stop("SIGKILL");
    await waitUntil(
      async () => (await rig.primaryAddress()) === `127.0.0.1:${rig.replica.port}`,
      60_000,
      "every sentinel to name the promoted replica",
    );
    await rig.primary.start();
    // replicas:1 can be confirmed again once the old primary follows the promoted one.
    const promoted = new Redis(rig.replica.url);
    promoted.on("error", () => undefined);
    await waitUntil(
      async () => /connected_slaves:1/.test(await promoted.info("replication")),
      60_000,
      "the old primary to follow the promoted one",
    ).finally(() => promoted.disconnect());

    const failoverMs = since(killedAt);
    let request: PendingRequest | undefined;
    await waitUntil(
      async () => {
        request = (await listPending({ redis, prefix: logPrefix })).find((p) => p.session === session);
        return request?.status === "parked";
      },
      60_000,
      "the parked request after the failover",
    );
    const decidedAt = Date.now();
    await decide(
      { log: producer.log, redis, operatorKey, trustedKeys: parseOperatorKeys([OPERATOR.publicKey]) },
      { session, requestId: request!.requestId, decision: "allow", by: "erin" },
    );
    const result = await producer.waitForTurn(turn, { timeoutMs: 90_000 });
    assert.equal(result.status, "finished", JSON.stringify(result.event.data));
    assert.deepEqual(readFileSync(ran, "utf8").split("\n").filter(Boolean), ["once"]);
    return { parkedMs, failoverMs, resumedMs: since(decidedAt) };
  } finally {
    await cleanup();
  }
}

const figures = await parkedFailover();
process.stdout.write(`${JSON.stringify({ bench: "parked-failover", resumedOnce: true, ...figures })}\n`);
process.exit(0);
