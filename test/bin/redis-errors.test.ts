// Redis gone or refusing: commands say which Redis (never its password), what failed and what to
// check, with no ioredis wording ("max retries per request", "Connection is closed"), and exit 3.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { Redis } from "ioredis";
import { explainRedisError, redisProblemOf, RedisUnavailableError } from "../../src/log/index.ts";
import { freePort, startRedisServer } from "../support/redis-server.ts";
import { NODE, testSpace, waitUntil } from "../worker/_support.ts";
import { BIN, turnstream } from "./_cli.ts";

const IOREDIS_WORDS = /max retries|maxRetriesPerRequest|Connection is closed|ECONNREFUSED/i;

test("run --wait against a closed port: which Redis, what to check, exit 3", async () => {
  const port = await freePort();
  const closedPort = await turnstream(["run", "--wait", "--", "hi"], {
    REDIS_URL: `redis://alice:pw-not-shown@127.0.0.1:${port}`,
  });
  assert.equal(closedPort.code, 3, closedPort.stderr);
  assert.match(
    closedPort.stderr,
    new RegExp(
      `^turnstream run: cannot reach Redis at redis://127\\.0\\.0\\.1:${port} \\(while connecting\\): is it running`,
    ),
  );
  assert.match(closedPort.stderr, /REDIS_URL/);
  assert.doesNotMatch(closedPort.stderr, IOREDIS_WORDS);
  assert.ok(!(closedPort.stdout + closedPort.stderr).includes("pw-not-shown"), "the password is never shown");
});

test(
  "run --wait while Redis is killed mid-wait: which Redis, while waiting for which turn, exit 3",
  { timeout: 90_000 },
  async () => {
    const server = await startRedisServer();
    const space = testSpace();
    const child = spawn(
      NODE,
      [
        BIN,
        "run",
        "--wait",
        "--prefix",
        space.logPrefix,
        "--queue-prefix",
        space.queuePrefix,
        "--cwd",
        space.workspace(),
        "--",
        "waits",
      ],
      {
        env: { ...process.env, NO_COLOR: "1", REDIS_URL: server.url },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      // No worker: the turn is queued and the command waits for it.
      await waitUntil(() => /^turn \S+ in session/m.test(stdout), 30000, `the wait to begin: ${stdout} ${stderr}`);
      const turn = /^turn (\S+) in session/m.exec(stdout)![1]!;
      await server.stop("SIGKILL");
      assert.equal(await exited, 3, stderr);
      assert.match(
        stderr,
        new RegExp(
          `turnstream run: cannot reach Redis at redis://127\\.0\\.0\\.1:${server.port} \\(while waiting for turn ${turn}\\): is it running`,
        ),
      );
      assert.doesNotMatch(stderr, IOREDIS_WORDS);
    } finally {
      child.kill("SIGKILL");
      await server.dispose();
      space.cleanup();
    }
  },
);

test(
  "Redis's refusals map to what to check: NOAUTH/WRONGPASS to the credentials, READONLY to the replica",
  { timeout: 60_000 },
  async () => {
    const primary = await startRedisServer({ args: ["--requirepass", "right-pass"] });
    const replica = await startRedisServer({
      args: ["--replicaof", "127.0.0.1", String(primary.port), "--masterauth", "right-pass"],
    });
    const clients = [
      new Redis(primary.url, { maxRetriesPerRequest: 0, lazyConnect: true }),
      new Redis(`redis://:wrong-pass@127.0.0.1:${primary.port}`, {
        maxRetriesPerRequest: 0,
        lazyConnect: true,
        retryStrategy: () => null,
      }),
      new Redis(replica.url, { maxRetriesPerRequest: 0 }),
    ];
    for (const redisClient of clients) redisClient.on("error", () => undefined);
    try {
      const [noAuth, wrongPass, onReplica] = clients as [Redis, Redis, Redis];
      const noAuthErr = await noAuth.set("k", "v").then(
        () => undefined,
        (err: unknown) => err,
      );
      assert.equal(redisProblemOf(noAuthErr), "auth", String(noAuthErr));
      // A refused AUTH arrives as the connection's error event (connect() itself then says the connection closed).
      const wrongPassErr = new Promise<unknown>((resolve) => wrongPass.once("error", resolve));
      await wrongPass.connect().catch(() => undefined);
      assert.equal(redisProblemOf(await wrongPassErr), "auth", String(await wrongPassErr));
      const readOnlyErr = await onReplica.set("k", "v").then(
        () => undefined,
        (err: unknown) => err,
      );
      assert.equal(redisProblemOf(readOnlyErr), "read_only", String(readOnlyErr));
      const explained = explainRedisError(readOnlyErr, replica.url, "appending to the event log");
      assert.ok(explained instanceof RedisUnavailableError);
      assert.match(
        explained.message,
        new RegExp(
          `Redis at ${replica.url} \\(while appending to the event log\\) is a read-only replica.*current primary`,
        ),
      );
      assert.equal(redisProblemOf(new Error("something else")), undefined);

      const badPass = await turnstream(["sessions"], { REDIS_URL: `redis://:wrong-pass@127.0.0.1:${primary.port}` });
      assert.equal(badPass.code, 3, badPass.stderr);
      assert.match(
        badPass.stderr,
        new RegExp(
          `Redis at redis://127\\.0\\.0\\.1:${primary.port} \\(while connecting\\) refused this client's credentials: check the user and password in REDIS_URL`,
        ),
      );
      assert.ok(!badPass.stderr.includes("wrong-pass"));
    } finally {
      for (const redisClient of clients) redisClient.disconnect();
      await replica.dispose();
      await primary.dispose();
    }
  },
);
