// A parked turn across a real Redis Sentinel failover: the turn parks on a worker that acknowledges
// appends at replicas:1, the primary is killed -9 while it waits, Sentinel promotes the replica, and a
// decision made afterwards resumes it: what parking recorded (the session file, turn.parked, the
// request) was on the replica, and the call runs once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Redis } from "ioredis";
import { decide, listPending, parseOperatorKeys, type PendingRequest } from "../../src/decisions/index.ts";
import { connectRedis, createEventLog } from "../../src/log/index.ts";
import { createProducer } from "../../src/queue/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { startTurnWorker } from "../../src/worker/index.ts";
import { OPERATOR, operatorKey } from "../decisions/_support.ts";
import { startSentinelRig } from "../support/sentinel.ts";
import { cliEnv, testSpace, waitUntil } from "../worker/_support.ts";

test(
  "a parked turn survives a Sentinel failover at replicas:1 and resumes once decided",
  { timeout: 240_000 },
  async (ctx) => {
    const space = testSpace();
    const ws = space.workspace();
    const ran = join(ws, "ran.txt");
    const rig = await startSentinelRig();
    ctx.after(() => rig.dispose());
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
    ctx.after(async () => {
      await worker.close({ graceMs: 1000 });
      await producer.close();
      redis.disconnect();
      onReplica.disconnect();
      await server.close();
      await rig.dispose();
      space.cleanup();
    });
    const { session, turn } = await producer.enqueueTurn({ prompt: "append", cwd: ws, options: { supervised: true } });
    const replicaLog = createEventLog({ redis: onReplica, prefix: logPrefix });
    await waitUntil(
      async () => (await replicaLog.stat(session)).state === "parked",
      60_000,
      "the replica to hold the park",
    );

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

    let request: PendingRequest | undefined;
    await waitUntil(
      async () => {
        request = (await listPending({ redis, prefix: logPrefix })).find((p) => p.session === session);
        return request?.status === "parked";
      },
      60_000,
      "the parked request after the failover",
    );
    await decide(
      { log: producer.log, redis, operatorKey, trustedKeys: parseOperatorKeys([OPERATOR.publicKey]) },
      { session, requestId: request!.requestId, decision: "allow", by: "erin" },
    );
    const result = await producer.waitForTurn(turn, { timeoutMs: 90_000 });
    assert.equal(result.status, "finished", JSON.stringify(result.event.data));
    assert.deepEqual(readFileSync(ran, "utf8").split("\n").filter(Boolean), ["once"]);
    assert.ok(existsSync(ran));
  },
);
