// The Redis ACL roles on a Redis with ACLs on: a reader lists and reads but cannot decide; an
// operator can write decisions and rules, yet without a key the worker trusts nothing it writes lets
// a tool run; with the key it does. The worker itself runs as the `worker` user (queue, log, hub).
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  generateOperatorKey,
  listPending,
  newAclPasswords,
  redisAclFile,
  ruleId,
  rulesKey,
  writeOperatorKeyFile,
  type AclRole,
  type PendingRequest,
} from "../../src/decisions/index.ts";
import { connectRedis, createEventLog, type RedisClient } from "../../src/log/index.ts";
import { createProducer } from "../../src/queue/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { startTurnWorker } from "../../src/worker/index.ts";
import { cliEnv, testSpace, waitUntil } from "../worker/_support.ts";
import { cli, OPERATOR } from "./_support.ts";
import { startAclServer } from "./_acl-redis.ts";

const ACL_DEPLOY_FILE = join(import.meta.dirname, "../../deploy/redis-users.acl");

test("deploy/redis-users.acl is what `turnstream acl` prints for the default prefixes, every role off", async () => {
  const printed = await cli(["acl"], {});
  assert.equal(printed.code, 0, printed.stderr);
  assert.equal(readFileSync(ACL_DEPLOY_FILE, "utf8"), printed.stdout);
  assert.match(printed.stdout, /^user default off /m);
  for (const role of ["admin", "worker", "operator", "reader"])
    assert.match(printed.stdout, new RegExp(`^user ${role} off resetpass `, "m"));
});

test("ACL roles: a reader cannot decide; an operator without a trusted key cannot make the worker run a tool; with it, it runs", async () => {
  const space = testSpace();
  const dir = mkdtempSync(join(tmpdir(), "ts-acl-"));
  const passwords = newAclPasswords();
  const aclFile = join(dir, "users.acl");
  writeFileSync(aclFile, redisAclFile({ logPrefix: space.logPrefix, queuePrefix: space.queuePrefix, passwords }), {
    mode: 0o600,
  });
  const redisServer = await startAclServer(aclFile);
  const url = (role: AclRole): string => `redis://${role}:${passwords[role]}@127.0.0.1:${redisServer.port}`;
  const clients: RedisClient[] = [];
  const as = (role: AclRole): RedisClient => {
    const client = connectRedis({ url: url(role), redisOptions: { maxRetriesPerRequest: 2 } });
    clients.push(client);
    return client;
  };
  const trustedKeyFile = join(dir, "trusted.key");
  writeOperatorKeyFile(trustedKeyFile, OPERATOR.privateKeyPem);
  const strangerKeyFile = join(dir, "stranger.key");
  const stranger = generateOperatorKey();
  writeOperatorKeyFile(strangerKeyFile, stranger.privateKeyPem);
  const cwd = space.workspace();
  const server = await startModelServer({
    script: {
      responses: [
        { content: [{ type: "tool_use", name: "Bash", input: { command: `touch ${join(cwd, "forged.txt")}` } }] },
        { content: [{ type: "text", text: "was refused" }] },
        { content: [{ type: "tool_use", name: "Bash", input: { command: `touch ${join(cwd, "signed.txt")}` } }] },
        { content: [{ type: "text", text: "made it" }] },
      ],
    },
  });
  // What the worker logs: the hub's reasons for ignoring, and any Redis permission the worker role lacks.
  const logged: Array<{ level: string; msg: string; obj: Record<string, unknown> }> = [];
  const record = (level: string) => (obj: object, msg?: string) =>
    void logged.push({ level, msg: msg ?? "", obj: obj as Record<string, unknown> });
  const logger = { debug: record("debug"), info: record("info"), warn: record("warn"), error: record("error") };
  const workerRedis = as("worker");
  const producer = createProducer({ redis: workerRedis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const worker = startTurnWorker({
    redis: workerRedis,
    logPrefix: space.logPrefix,
    queuePrefix: space.queuePrefix,
    workspaceRoots: [cwd],
    instanceRoot: space.dir("inst"),
    runEnv: cliEnv(server.url),
    operatorKeys: [OPERATOR.publicKey],
    // The hub's reasons for ignoring decisions are logged while it waits in the running CLI.
    parking: { enabled: false },
    logger,
  });
  const reader = as("reader");
  const base = { TURNSTREAM_PREFIX: space.logPrefix, TURNSTREAM_USER: "op" };
  const readerEnv = { ...base, REDIS_URL: url("reader"), TURNSTREAM_OPERATOR_KEY: trustedKeyFile };
  const operatorEnv = { ...base, REDIS_URL: url("operator") };
  const nextPending = async (session: string): Promise<PendingRequest> => {
    let found: PendingRequest | undefined;
    await waitUntil(
      async () => {
        found = (await listPending({ redis: reader, prefix: space.logPrefix })).find(
          (p) => p.session === session && p.status === "pending",
        );
        return found !== undefined;
      },
      30_000,
      "a pending decision",
    );
    return found!;
  };
  try {
    const firstTurn = await producer.enqueueTurn({ prompt: "make forged.txt", cwd, options: { supervised: true } });
    const p1 = await nextPending(firstTurn.session);

    // The reader lists and reads…
    for (const args of [["pending", "--json"], ["tail", firstTurn.session], ["sessions"]]) {
      const readRun = await cli(args, readerEnv);
      assert.equal(readRun.code, 0, `${args[0]} as reader: ${readRun.stderr}`);
    }
    assert.match((await cli(["pending"], readerEnv)).stdout, new RegExp(p1.requestId));
    // …but cannot decide, even holding the trusted key, and is told which role it needs.
    const denied = await cli(["decide", firstTurn.session, p1.requestId, "allow"], readerEnv);
    assert.equal(denied.code, 2);
    assert.match(denied.stderr, /may not record decisions \(Redis said: NOPERM.*operator role/);

    // An operator-role user without the trusted key: no key at all is refused before anything is written…
    const keyless = await cli(["decide", firstTurn.session, p1.requestId, "allow"], operatorEnv);
    assert.equal(keyless.code, 2);
    assert.match(keyless.stderr, /TURNSTREAM_OPERATOR_KEY/);
    // …a key the worker does not trust is written and ignored…
    const foreign = await cli(
      ["decide", firstTurn.session, p1.requestId, "allow", "--key", strangerKeyFile],
      operatorEnv,
    );
    assert.equal(foreign.code, 0, foreign.stderr);
    // …and so are an unsigned decision.made and an unsigned allow rule written with the operator's access.
    const opRedis = as("operator");
    await createEventLog({ redis: opRedis, prefix: space.logPrefix }).appendUnfenced(firstTurn.session, [
      {
        turn: firstTurn.turn,
        attempt: 1,
        kind: "decision.made",
        data: {
          requestId: p1.requestId,
          decision: "allow",
          by: "mallory",
          source: "operator",
          reason: "",
          decidedAt: new Date().toISOString(),
        },
      },
    ]);
    const forgedRule = {
      id: ruleId("allow", "Bash(touch *)"),
      pattern: "Bash(touch *)",
      effect: "allow",
      by: "mallory",
      at: new Date().toISOString(),
    };
    await opRedis.hset(rulesKey(space.logPrefix), forgedRule.id, JSON.stringify(forgedRule));
    // The trusted operator (who also knows the fleet's keys, so the foreign decision does not count as first) denies.
    const deny = await cli(["decide", firstTurn.session, p1.requestId, "deny", "--reason", "after the forgeries"], {
      ...operatorEnv,
      TURNSTREAM_OPERATOR_KEY: trustedKeyFile,
      TURNSTREAM_OPERATOR_KEYS: OPERATOR.publicKey,
    });
    assert.equal(deny.code, 0, deny.stderr);
    assert.equal((await producer.waitForTurn(firstTurn.turn, { timeoutMs: 30_000 })).status, "finished");
    assert.equal(existsSync(join(cwd, "forged.txt")), false, "no forged or foreign allow let the tool run");
    const ignored = logged.filter((l) => l.msg.startsWith("ignored a decision")).map((l) => String(l.obj["why"]));
    assert.deepEqual(
      ignored.sort(),
      ["it is not signed", `its key ${stranger.keyId} is not one of this worker's operator keys`].sort(),
    );

    // The forged rule, read for this request, is ignored (the call waits); the trusted operator's allow is acted on.
    const secondTurn = await producer.enqueueTurn({
      session: firstTurn.session,
      prompt: "make signed.txt",
      cwd,
      options: { supervised: true },
    });
    const p2 = await nextPending(firstTurn.session);
    assert.ok(logged.some((l) => l.msg.startsWith("ignored a trust rule") && l.obj["why"] === "it is not signed"));
    const allow = await cli(["decide", firstTurn.session, p2.requestId, "allow"], {
      ...operatorEnv,
      TURNSTREAM_OPERATOR_KEY: trustedKeyFile,
    });
    assert.equal(allow.code, 0, allow.stderr);
    assert.equal((await producer.waitForTurn(secondTurn.turn, { timeoutMs: 30_000 })).status, "finished");
    assert.ok(existsSync(join(cwd, "signed.txt")), "the signed allow ran the tool");
    assert.deepEqual(
      logged.filter((l) => /NOPERM/.test(JSON.stringify(l))),
      [],
      "the worker role had every permission it used",
    );
  } finally {
    await worker.close({ graceMs: 1000 });
    await producer.close();
    for (const client of clients) client.disconnect();
    await server.close();
    redisServer.child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
    space.cleanup();
  }
});
