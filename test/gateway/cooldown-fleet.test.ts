// The fleet cooldown end to end: three workers' gateways (each its own gateway, policy and Redis
// connection, in this process) share one Redis and one credential in front of the scripted model
// server, which answers 429 (retry-after 1 s) for a window and then succeeds. Clients that retry as
// the CLI was measured to (after retry-after × 1 to 1.25), and then the real CLI, send concurrent
// requests; the upstream requests that arrive while the upstream is limiting are counted with the
// cooldown and without it, in the same test. Also: a client that hangs up while held sends nothing
// upstream, and Redis holds the credential's fingerprint, never the credential.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectRedis, type RedisClient } from "../../src/log/index.ts";
import { runTurn } from "../../src/runner/index.ts";
import {
  credentialFrom,
  FleetCooldown,
  listCooldowns,
  retryAfterMs,
  startGateway,
  type ModelCall,
  type ModelGateway,
  type RunGrant,
} from "../../src/gateway/index.ts";
import { hermeticEnv, startModelServer, type ModelServer } from "../../src/testing/index.ts";

const WORKERS = 3;
const canary = (): string => `sk-ant-api03-${randomBytes(24).toString("base64url")}`;

interface Worker {
  gateway: ModelGateway;
  grant: RunGrant;
  calls: ModelCall[];
  policy: FleetCooldown | undefined;
  redis: RedisClient | undefined;
}

interface Fleet {
  server: ModelServer;
  workers: Worker[];
  key: string;
  prefix: string;
  close(): Promise<void>;
}

/** The scripted upstream limiting for `windowMs` after its first request, and WORKERS gateways in front of it. */
async function fleet(windowMs: number, cooled: boolean): Promise<Fleet> {
  const key = canary();
  const prefix = `t-fleet-${randomBytes(4).toString("hex")}:`;
  const server = await startModelServer({
    credential: key,
    script: {
      responses: [
        {
          error: { status: 429, type: "rate_limit_error", message: "limited", headers: { "retry-after": "1" } },
          forMs: windowMs,
        },
      ],
    },
  });
  const workers: Worker[] = [];
  for (let index = 0; index < WORKERS; index++) {
    const redis = cooled ? connectRedis({ url: "redis://127.0.0.1:6379", env: {} }) : undefined;
    const policy = redis === undefined ? undefined : new FleetCooldown({ redis, prefix });
    const gateway = await startGateway({ policy });
    const calls: ModelCall[] = [];
    const grant = gateway.issue(
      { baseUrl: new URL(server.url), credential: credentialFrom({ ANTHROPIC_API_KEY: key }, undefined)! },
      { binding: { session: `s${index}` }, onCall: (call) => void calls.push(call) },
    );
    workers.push({ gateway, grant, calls, policy, redis });
  }
  return {
    server,
    workers,
    key,
    prefix,
    async close() {
      for (const worker of workers) await worker.gateway.close();
      const redis = workers[0]?.redis;
      if (redis !== undefined) {
        const keys = await redis.keys(`${prefix}*`);
        if (keys.length > 0) await redis.del(...keys);
      }
      for (const worker of workers) worker.redis?.disconnect();
      await server.close();
    },
  };
}

/** One Messages request through a worker's gateway; its status and retry-after. */
async function ask(worker: Worker, signal?: AbortSignal): Promise<{ status: number; waitMs: number | undefined }> {
  const res = await fetch(`${worker.gateway.url}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": worker.grant.token, "content-type": "application/json" },
    body: JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 16, messages: [{ role: "user", content: "hi" }] }),
    signal: signal ?? null,
  });
  await res.arrayBuffer();
  return { status: res.status, waitMs: retryAfterMs(Object.fromEntries(res.headers)) };
}

/** Asks until answered 200, waiting between tries as CLI 2.1.332 does: retry-after × 1 to 1.25. */
async function askLikeTheCli(worker: Worker): Promise<number> {
  for (let attempt = 1; attempt <= 20; attempt++) {
    const { status, waitMs } = await ask(worker);
    if (status === 200) return attempt;
    await new Promise((resolve) => setTimeout(resolve, (waitMs ?? 500 * 2 ** attempt) * (1 + Math.random() * 0.25)));
  }
  throw new Error("no success after 20 tries");
}

/** Upstream requests answered 429 after the first: they reached the upstream while it was limiting. */
const limitedAfterFirst = (server: ModelServer): number =>
  server.requests().filter((request) => request.responseIndex === 0).length - 1;

/**
 * One worker meets the limit first; once that is known (its 429 answered, and with the cooldown its
 * record in Redis), four clients per worker ask at once and retry as the CLI does until answered.
 */
async function wave(cooled: boolean): Promise<{ limited: number; upstream: number; tries: number }> {
  const stage = await fleet(1500, cooled);
  try {
    assert.equal((await ask(stage.workers[0]!)).status, 429);
    if (cooled) {
      await stage.workers[0]!.policy!.flush();
      assert.equal((await listCooldowns(stage.workers[0]!.redis!, stage.prefix)).length, 1);
    }
    const clients = stage.workers.flatMap((worker) => [1, 2, 3, 4].map(() => askLikeTheCli(worker)));
    const tries = (await Promise.all(clients)).reduce((sum, each) => sum + each, 0);
    return { limited: limitedAfterFirst(stage.server), upstream: stage.server.requests().length, tries };
  } finally {
    await stage.close();
  }
}

test(`${WORKERS} workers, 12 clients retrying as the CLI does: with the cooldown at most ${WORKERS + 1} upstream requests meet the limit`, async () => {
  const without = await wave(false);
  const withCooldown = await wave(true);
  const figures = `with the cooldown ${withCooldown.limited} upstream requests met the limit after the first (${withCooldown.upstream} upstream in all, ${withCooldown.tries} client tries); without it ${without.limited} (${without.upstream} upstream, ${without.tries} tries)`;
  assert.ok(withCooldown.limited <= WORKERS + 1, figures);
  assert.ok(withCooldown.limited >= 1, `the limit lasts past the first cooldown, so a probe met it: ${figures}`);
  assert.ok(without.limited > withCooldown.limited * 3, figures);
  // Every client got its answer; with the cooldown only a probe's client saw a 429, the rest were held.
  assert.equal(withCooldown.tries, 12 + withCooldown.limited, figures);
  process.stdout.write(`# ${figures}\n`);
});

test(`${WORKERS} real CLIs, one per worker: with the cooldown the turns finish and at most ${WORKERS + 1} of their requests meet the limit`, async () => {
  const run = async (cooled: boolean): Promise<{ limited: number; retries: number }> => {
    const stage = await fleet(3000, cooled);
    const envs = stage.workers.map(() => hermeticEnv({ maxRetries: 10 }));
    try {
      const turns = stage.workers.map(async (worker, index) => {
        const cwd = realpathSync(mkdtempSync(join(tmpdir(), "ts-cooldown-ws-")));
        const handle = runTurn({
          cwd,
          prompt: "hi",
          env: { ...envs[index]!.env, ...worker.gateway.runEnv(worker.grant) },
        });
        let retries = 0;
        for await (const line of handle.lines) if (line.raw.includes('"subtype":"api_retry"')) retries++;
        const outcome = await handle.outcome;
        assert.equal(outcome.resultText, "done");
        return retries;
      });
      const retries = (await Promise.all(turns)).reduce((sum, each) => sum + each, 0);
      // The three CLIs' first requests were in flight together before any 429 was answered: only
      // those that arrived later met a limit the fleet already knew of.
      const asked = stage.server.requests().filter((request) => request.kind === "messages");
      const first = Date.parse(asked[0]!.at);
      const limited = asked.filter((r) => r.responseIndex === 0 && Date.parse(r.at) > first + 100).length;
      return { limited, retries };
    } finally {
      for (const env of envs) env.cleanup();
      await stage.close();
    }
  };
  const without = await run(false);
  const withCooldown = await run(true);
  const figures = `with the cooldown ${withCooldown.limited} CLI requests met the known limit (${withCooldown.retries} api_retry lines); without it ${without.limited} (${without.retries} api_retry lines)`;
  assert.ok(withCooldown.limited <= WORKERS + 1, figures);
  assert.ok(without.limited > withCooldown.limited, figures);
  assert.ok(withCooldown.retries < without.retries, figures);
  process.stdout.write(`# ${figures}\n`);
});

test("a client that hangs up while held sends nothing upstream and spends no probe", async () => {
  const stage = await fleet(60_000, true);
  try {
    const [first, second] = stage.workers;
    assert.equal((await ask(first!)).status, 429);
    await first!.policy!.flush();
    const before = stage.server.requests().length;
    const leaving = ask(second!, AbortSignal.timeout(300)).catch((err: unknown) => (err as Error).name);
    assert.match(String(await leaving), /TimeoutError|AbortError/);
    // The gateway records the hang-up as the call's end.
    const deadline = Date.now() + 5000;
    while (second!.calls.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.equal(second!.calls[0]?.status, 499);
    assert.equal(second!.calls[0]?.answeredBy, "aborted");
    assert.equal(stage.server.requests().length, before, "nothing reached the upstream");
    assert.equal((await listCooldowns(first!.redis!, stage.prefix))[0]?.probes, 0);
  } finally {
    await stage.close();
  }
});

test("Redis holds the credential's fingerprint, never the credential", async () => {
  const stage = await fleet(60_000, true);
  try {
    const worker = stage.workers[0]!;
    assert.equal((await ask(worker)).status, 429);
    await worker.policy!.flush();
    const fingerprint = credentialFrom({ ANTHROPIC_API_KEY: stage.key }, undefined)!.fingerprint();
    const redis = worker.redis!;
    const keys = await redis.keys(`${stage.prefix}*`);
    assert.deepEqual(keys.sort(), [`${stage.prefix}{cooldown}:c:${fingerprint}`, `${stage.prefix}{cooldown}:index`]);
    const stored: string[] = [...keys];
    for (const key of keys) {
      const type = await redis.type(key);
      if (type === "hash") stored.push(...Object.entries(await redis.hgetall(key)).flat());
      else stored.push(...(await redis.zrange(key, 0, -1, "WITHSCORES")));
    }
    const text = stored.join("\n");
    assert.ok(text.includes(fingerprint));
    // Neither the key nor any long part of it (its fingerprint is a digest of it, not a piece).
    for (let start = 0; start + 12 <= stage.key.length; start += 6)
      assert.equal(text.includes(stage.key.slice(start, start + 12)), false, `part ${start} of the key is stored`);
  } finally {
    await stage.close();
  }
});
