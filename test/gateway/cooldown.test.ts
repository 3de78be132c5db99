// The fleet cooldown policy on real Redis, asked directly as the gateway asks it: several instances
// (the fleet's workers) share one Redis. A 429 holds every instance's Messages requests until the
// cooldown ends; then exactly one goes as the probe while the rest hold; the probe's 429 extends the
// cooldown by a strike, its success clears it for all; past the hold maximum a 429 with the shared
// remaining time is answered; a client that hangs up while held costs nothing; a probe that never
// reached the upstream is released; keys expire on their own; Redis that cannot be read lets requests
// through (fail-open) and is asked again a second later; under the ACL roles a worker can do all of it
// and a reader can list the cooldowns.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import { connectRedis, type RedisClient } from "../../src/log/index.ts";
import {
  cooldownKeys,
  FleetCooldown,
  listCooldowns,
  type CooldownEntry,
  type CooldownOptions,
  type ModelCall,
  type PolicyCall,
  type PolicyDecision,
} from "../../src/gateway/index.ts";
import { startRedisServer, type RedisServer } from "../support/redis-server.ts";
import { startAclRedis } from "../decisions/_acl-redis.ts";

const FP = "0123456789abcdef";

/** What a test's context offers these stages: a clean-up run when the test ends. */
interface Cleanups {
  after(fn: () => Promise<void>): void;
}

interface Stage {
  redis: RedisClient;
  prefix: string;
  policy(options?: Partial<CooldownOptions>): FleetCooldown;
  list(): ReturnType<typeof listCooldowns>;
}

async function stage(ctx: Cleanups): Promise<Stage> {
  const redis = connectRedis({ url: "redis://127.0.0.1:6379", env: {} });
  const prefix = `t-cooldown-${randomBytes(4).toString("hex")}:`;
  ctx.after(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });
  return {
    redis,
    prefix,
    policy: (options = {}) => new FleetCooldown({ redis, prefix, pollMs: 20, ...options }),
    list: () => listCooldowns(redis, prefix),
  };
}

/** A Redis of the test's own (its command counts and pauses are that test's alone) and a client of it. */
async function ownRedis(ctx: Cleanups): Promise<{ server: RedisServer; redis: RedisClient }> {
  const server = await startRedisServer();
  const redis = connectRedis({ url: server.url, env: {} });
  // A paused server makes the client report errors; the tests read them from the policy, not the client.
  redis.on("error", () => {});
  ctx.after(async () => {
    redis.disconnect();
    await server.dispose();
  });
  return { server, redis };
}

/** A Messages request as the gateway shows it to a policy, with its client's hang-up. */
function request(path = "/v1/messages"): PolicyCall & { hangUp(): void } {
  const client = new AbortController();
  return {
    callId: randomUUID(),
    worstCaseUsd: 0.01,
    run: { session: "s", turn: "t", attempt: 1 },
    model: "claude-sonnet-4-5",
    path,
    credentialFingerprint: FP,
    signal: client.signal,
    hangUp: () => client.abort(),
  };
}

/** The upstream's answer to `call`, told to the policy that let it through; resolves once Redis has it. */
async function answer(policy: FleetCooldown, call: PolicyCall, status: number, retryAfterMs?: number): Promise<void> {
  policy.onUpstreamAnswer(call, { status, retryAfterMs });
  await policy.flush();
}

/** A Messages request that `policy` lets through and the upstream answers 429: the cooldown begins. */
async function answered429(policy: FleetCooldown, retryAfterMs: number): Promise<void> {
  const limited = request();
  await policy.beforeRequest(limited);
  await answer(policy, limited, 429, retryAfterMs);
}

/** How the gateway saw `call` end, with `fields` (a status of 200 unless they say otherwise). */
function ended(call: PolicyCall, fields: Partial<ModelCall> = {}): ModelCall {
  const started = { startedAt: new Date().toISOString(), method: "POST", path: call.path, stream: true };
  return { callId: call.callId, ...started, status: 200, durationMs: 5, credential: FP, ...fields };
}

/** A decision with the time it took. */
async function timed(decision: Promise<PolicyDecision>): Promise<{ decision: PolicyDecision; ms: number }> {
  const t0 = performance.now();
  return { decision: await decision, ms: performance.now() - t0 };
}

/** Whether `promise` is still pending after `ms` (asserting that nothing happens needs a window). */
async function pendingAfter(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const marker = Symbol("pending");
  const winner = await Promise.race([promise, new Promise((resolve) => setTimeout(() => resolve(marker), ms))]);
  return winner === marker;
}

test("a 429 seen by one worker holds the others' requests; one probe goes when it ends; its success frees them all", async (ctx) => {
  const rig = await stage(ctx);
  const [first, second, third] = [rig.policy(), rig.policy(), rig.policy()];
  const limited = request();
  assert.deepEqual(await first.beforeRequest(limited), { action: "allow" });
  await answer(first, limited, 429, 600);
  const [cooling] = await rig.list();
  assert.equal(cooling?.fingerprint, FP);
  assert.equal(cooling?.status, 429);
  assert.equal(cooling?.strikes, 1);
  assert.ok(cooling!.remainingMs > 400 && cooling!.remainingMs <= 600, `remaining ${cooling!.remainingMs} ms`);

  const calls = [request(), request(), request(), request()];
  const owners = [second, third, second, first];
  const allowedAt: number[] = [];
  const t0 = performance.now();
  const decisions = calls.map((call, index) =>
    owners[index]!.beforeRequest(call).then((decision) => {
      allowedAt[index] = performance.now() - t0;
      return decision;
    }),
  );
  const probeIndex = await Promise.race(decisions.map((decision, index) => decision.then(() => index)));
  assert.ok(allowedAt[probeIndex]! >= 350, `the probe waited for the cooldown's end (${allowedAt[probeIndex]} ms)`);
  assert.deepEqual(await decisions[probeIndex], { action: "allow" });
  const others = decisions.filter((_, index) => index !== probeIndex);
  for (const other of others) assert.ok(await pendingAfter(other, 200), "the others hold while the probe is out");
  assert.equal((await rig.list())[0]?.probing, true);
  assert.equal((await rig.list())[0]?.probes, 1);

  await answer(owners[probeIndex]!, calls[probeIndex]!, 200);
  for (const other of others) assert.deepEqual(await other, { action: "allow" });
  assert.deepEqual(await rig.list(), [], "the probe's success cleared the cooldown");
  assert.deepEqual(await rig.redis.keys(`${rig.prefix}*`), [], "nothing is left behind");
});

test("a probe answered 429 again extends the cooldown by a strike: backoff doubles up to its cap, retry-after wins", async (ctx) => {
  const rig = await stage(ctx);
  const policy = rig.policy({ baseBackoffMs: 100, maxBackoffMs: 400 });
  const first = request();
  await policy.beforeRequest(first);
  await answer(policy, first, 529);
  const expected = [100, 200, 400, 400];
  for (const [strike, cooldownMs] of expected.entries()) {
    const [entry] = await rig.list();
    assert.equal(entry?.strikes, strike + 1);
    assert.equal(entry?.status, strike === 0 ? 529 : 429);
    assert.ok(
      entry!.remainingMs <= cooldownMs && entry!.remainingMs > cooldownMs - 80,
      `strike ${strike + 1}: ${entry!.remainingMs} ms of ${cooldownMs}`,
    );
    const probe = request();
    const { decision, ms } = await timed(policy.beforeRequest(probe));
    assert.deepEqual(decision, { action: "allow" });
    assert.ok(ms >= cooldownMs - 80, `held ${ms} ms for a ${cooldownMs} ms cooldown`);
    await answer(policy, probe, 429);
  }
  // The answer's own retry-after, within the longest cooldown.
  const probe = request();
  await policy.beforeRequest(probe);
  await answer(policy, probe, 429, 10_000);
  const [entry] = await rig.list();
  assert.ok(entry!.remainingMs <= 400 && entry!.remainingMs > 300, `capped at maxBackoffMs: ${entry!.remainingMs}`);
  assert.equal(entry!.probes, 5);
});

test("429s of requests already in flight when the cooldown began add no strike and never shorten it", async (ctx) => {
  const rig = await stage(ctx);
  const said: string[] = [];
  const logger = {
    debug() {},
    warn() {},
    error() {},
    info: (_o: unknown, msg?: string) => void said.push(String(msg)),
  };
  const [one, two] = [rig.policy({ logger }), rig.policy({ logger })];
  const limited = request();
  const inFlight = request();
  await one.beforeRequest(limited);
  await two.beforeRequest(inFlight);
  await answer(one, limited, 429, 2000);
  await answer(two, inFlight, 503, 100);
  const [entry] = await rig.list();
  assert.equal(entry?.strikes, 1);
  assert.equal(entry?.status, 503, "the latest status is shown");
  assert.equal(said.length, 1, `the cooldown's start is logged once: ${said.join("; ")}`);
  assert.ok(entry!.remainingMs > 1800, `not shortened: ${entry!.remainingMs} ms`);
  const pttl = await rig.redis.pttl(cooldownKeys(rig.prefix).cooldown(FP));
  assert.ok(pttl > 2000 && pttl <= 2000 + 30_000, `the hash expires one probe lease after the end (pttl ${pttl})`);
  assert.ok(
    (await rig.redis.pttl(cooldownKeys(rig.prefix).index)) >= pttl - 50,
    "the index lives as long as its member",
  );
});

test("past the hold maximum the gateway answers 429 with the shared remaining time; 0 answers at once", async (ctx) => {
  const rig = await stage(ctx);
  const recorder = rig.policy();
  await answered429(recorder, 5000);

  const held = await timed(rig.policy({ maxHoldMs: 300 }).beforeRequest(request()));
  assert.ok(held.ms >= 290 && held.ms < 1500, `held ${held.ms} ms`);
  assert.equal(held.decision.action, "refuse");
  if (held.decision.action !== "refuse") return;
  assert.equal(held.decision.status, 429);
  assert.equal(held.decision.type, "rate_limit_error");
  assert.ok(
    held.decision.retryAfterS === 4 || held.decision.retryAfterS === 5,
    `retry-after ${held.decision.retryAfterS}`,
  );

  const atOnce = await timed(rig.policy({ maxHoldMs: 0 }).beforeRequest(request()));
  assert.equal(atOnce.decision.action, "refuse");
  assert.ok(atOnce.ms < 200, `answered in ${atOnce.ms} ms`);
  assert.equal((await rig.list())[0]?.probes, 0, "no probe was spent");
});

test("a client that hangs up while held costs nothing: no probe is spent, the hold ends at once", async (ctx) => {
  const rig = await stage(ctx);
  const policy = rig.policy();
  await answered429(policy, 400);
  const leaving = request();
  const pending = timed(policy.beforeRequest(leaving));
  setTimeout(() => leaving.hangUp(), 50);
  const left = await pending;
  assert.ok(left.ms < 250, `the hold ended when the client left (${left.ms} ms)`);
  assert.equal(left.decision.action, "refuse", "never an allow: nothing goes upstream");
  assert.equal((await rig.list())[0]?.probes, 0);
  // After the end, the next request is the probe: the one that left took none.
  const next = request();
  assert.deepEqual(await policy.beforeRequest(next), { action: "allow" });
  assert.equal((await rig.list())[0]?.probes, 1);
});

test("a streamed 200 that ends in an overload or rate-limit error event cools the credential down; other error events do not", async (ctx) => {
  const rig = await stage(ctx);
  const [one, two] = [rig.policy(), rig.policy()];
  for (const streamError of ["invalid_request_error", "api_error", "other_error"]) {
    const call = request();
    assert.deepEqual(await one.beforeRequest(call), { action: "allow" });
    await answer(one, call, 200);
    one.afterResponse(call, ended(call, { streamError }));
    await one.flush();
    assert.deepEqual(await rig.list(), [], `${streamError} limits nothing`);
  }
  // A count_tokens answer is not a Messages request: its error events limit nothing either.
  const counted = request("/v1/messages/count_tokens");
  one.afterResponse(counted, ended(counted, { streamError: "overloaded_error" }));
  await one.flush();
  assert.deepEqual(await rig.list(), []);

  const overloaded = request();
  assert.deepEqual(await one.beforeRequest(overloaded), { action: "allow" });
  await answer(one, overloaded, 200);
  one.afterResponse(overloaded, ended(overloaded, { streamError: "overloaded_error" }));
  await one.flush();
  const [cooling] = await rig.list();
  assert.equal(cooling?.status, 529, "recorded as the status an overload answers with");
  assert.equal(cooling?.strikes, 1);
  assert.ok(await pendingAfter(two.beforeRequest(request()), 200), "another worker's request holds");

  const limited = request();
  one.afterResponse(limited, ended(limited, { streamError: "rate_limit_error" }));
  await one.flush();
  assert.equal((await rig.list())[0]?.status, 429, "the latest answer's status");
});

test("a probe that never reached the upstream is released: the next request probes at once", async (ctx) => {
  const rig = await stage(ctx);
  const [one, two] = [rig.policy(), rig.policy()];
  await answered429(one, 200);
  const probe = request();
  assert.deepEqual(await one.beforeRequest(probe), { action: "allow" });
  // Its client hung up, or another policy refused it: the gateway ends it without an upstream answer.
  one.afterResponse(probe, ended(probe, { status: 0, answeredBy: "aborted" }));
  await one.flush();
  const { decision, ms } = await timed(two.beforeRequest(request()));
  assert.deepEqual(decision, { action: "allow" });
  assert.ok(ms < 200, `probed at once (${ms} ms), not after the 30 s lease`);
  assert.equal((await rig.list())[0]?.probes, 2);
});

test("only Messages requests are held; a credential with no cooldown costs one read, then none for a moment", async (ctx) => {
  // A Redis of its own, so its command counts are this test's alone.
  const { redis } = await ownRedis(ctx);
  const policy = new FleetCooldown({ redis, prefix: "t-reads:", clearCacheMs: 60_000 });
  await answered429(policy, 5000);
  const counting = await timed(policy.beforeRequest(request("/v1/messages/count_tokens")));
  assert.deepEqual(counting.decision, { action: "allow" });
  assert.ok(counting.ms < 100, `not held (${counting.ms} ms)`);

  const scriptCalls = async (): Promise<number> => {
    const info = await redis.info("commandstats");
    const calls = (name: string): number => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
    return calls("evalsha") + calls("eval");
  };
  const other = { ...request(), credentialFingerprint: "fedcba9876543210" };
  const before = await scriptCalls();
  for (let round = 0; round < 5; round++) assert.deepEqual(await policy.beforeRequest(other), { action: "allow" });
  assert.equal((await scriptCalls()) - before, 1, "one read for five requests within clearCacheMs");
  // A 429 for that credential drops what this worker knew at once.
  await answer(policy, other, 429, 5000);
  assert.equal((await policy.beforeRequest({ ...other, signal: AbortSignal.timeout(100) })).action, "refuse");
});

test("Redis that does not answer lets requests through (fail-open) with a warning, and is asked again a second later", async (ctx) => {
  const { server, redis } = await ownRedis(ctx);
  const warnings: string[] = [];
  const logger = {
    debug() {},
    info() {},
    error() {},
    warn: (_o: unknown, msg?: string) => void warnings.push(String(msg)),
  };
  const policy = new FleetCooldown({ redis, prefix: "t-down:", logger, pollMs: 20 });
  await answered429(policy, 30_000);
  assert.equal((await listCooldowns(redis, "t-down:")).length, 1);

  server.pause();
  try {
    const unread = await timed(policy.beforeRequest(request()));
    assert.deepEqual(unread.decision, { action: "allow" }, "a cooldown is not a security boundary");
    assert.ok(unread.ms >= 450 && unread.ms < 1000, `one bounded read (${unread.ms} ms)`);
    assert.ok(
      warnings.some((w) => /fail-open/.test(w)),
      warnings.join("; "),
    );
    const next = await timed(policy.beforeRequest(request()));
    assert.deepEqual(next.decision, { action: "allow" });
    assert.ok(next.ms < 50, `no read while Redis is known down (${next.ms} ms)`);
  } finally {
    server.resume();
  }
  // Once Redis answers again (after the second of not asking), the cooldown holds requests again: a
  // request whose client leaves after 300 ms is held that long, not let through.
  const deadline = Date.now() + 5000;
  let decision: PolicyDecision;
  do decision = await policy.beforeRequest({ ...request(), signal: AbortSignal.timeout(300) });
  while (decision.action === "allow" && Date.now() < deadline);
  assert.equal(decision.action, "refuse", "held again, its client gone after 300 ms");
});

test("under turnstream's ACL roles: a worker records, holds and probes; a reader lists the cooldowns", async (ctx) => {
  const acl = await startAclRedis({ logPrefix: "tacl:", queuePrefix: "{tacl-q}" });
  ctx.after(() => acl.close());
  const worker = new FleetCooldown({ redis: acl.client("worker"), prefix: "tacl:", pollMs: 20 });
  await answered429(worker, 300);
  const [listed] = await listCooldowns(acl.client("reader"), "tacl:");
  assert.equal(listed?.fingerprint, FP);
  assert.ok(listed!.remainingMs > 0 && listed!.remainingMs <= 300, `remaining ${listed!.remainingMs} ms`);
  const probe = request();
  const { decision, ms } = await timed(worker.beforeRequest(probe));
  assert.deepEqual(decision, { action: "allow" });
  assert.ok(ms >= 200, `held ${ms} ms`);
  assert.equal((await listCooldowns(acl.client("reader"), "tacl:"))[0]?.probing, true);
  await answer(worker, probe, 200);
  assert.deepEqual(await listCooldowns(acl.client("reader"), "tacl:"), []);
});

test("a check that answers after its timeout and claimed the probe gives the claim back", async (ctx) => {
  const { server, redis } = await ownRedis(ctx);
  const policy = new FleetCooldown({ redis, prefix: "t-late:", pollMs: 20 });
  await answered429(policy, 100);
  server.pause();
  let unchecked: PolicyDecision;
  try {
    // The cooldown ends while Redis is stopped: the check waiting in the client's queue will find it
    // ended and claim the probe, after the request went on unchecked.
    unchecked = await policy.beforeRequest(request());
  } finally {
    server.resume();
  }
  assert.deepEqual(unchecked, { action: "allow" });
  const deadline = Date.now() + 5000;
  let entry: CooldownEntry | undefined;
  do {
    await policy.flush();
    [entry] = await listCooldowns(redis, "t-late:");
  } while ((entry?.probes !== 1 || entry.probing) && Date.now() < deadline);
  assert.equal(entry?.probes, 1, "the late check claimed the probe");
  assert.equal(entry?.probing, false, "and gave it back");
});
