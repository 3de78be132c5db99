// `turnstream status` lists the model cooldowns the gateways share (text and --json): the credential's
// fingerprint, the status that set it, when it ends, its strikes and probes; "none" once it is cleared.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { connectRedis } from "../../src/log/index.ts";
import { FleetCooldown, type CooldownEntry, type PolicyCall } from "../../src/gateway/index.ts";
import { onlyJson, turnstream } from "./_cli.ts";

test("status shows a credential's cooldown with its fingerprint, status, end, strikes and probes; none once cleared", async (ctx) => {
  const redis = connectRedis({ env: {} });
  const prefix = `tcool${randomBytes(4).toString("hex")}:`;
  ctx.after(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });
  const env = { TURNSTREAM_PREFIX: prefix, TURNSTREAM_QUEUE_PREFIX: `{${prefix}q}` };
  const policy = new FleetCooldown({ redis, prefix });
  const call: PolicyCall = {
    callId: "call-1",
    worstCaseUsd: 0.01,
    run: { session: "s" },
    model: undefined,
    path: "/v1/messages",
    credentialFingerprint: "00aa11bb22cc33dd",
  };
  const asked = Date.now();
  policy.onUpstreamAnswer(call, { status: 529, retryAfterMs: 45_000 });
  await policy.flush();
  // What is left can be no more than asked for, and no less than that minus the time since (a command
  // takes seconds to start on a loaded machine).
  const assertLeft = (remainingMs: number): void =>
    assert.ok(remainingMs <= 45_000 && remainingMs >= 45_000 - (Date.now() - asked) - 1000, `${remainingMs} ms left`);

  const text = await turnstream(["status"], env);
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, /^model cooldowns: 1 /m);
  const line =
    /^ {2}credential 00aa11bb22cc33dd: 529, until \d{4}-\d\d-\d\dT[\d:.]+Z \((\d+)s left\), strike 1, 0 probe\(s\) so far$/m;
  assertLeft(Number(line.exec(text.stdout)?.[1] ?? Number.NaN) * 1000);
  const json = await turnstream(["status", "--json"], env);
  assert.equal(json.code, 0, json.stderr);
  const [entry, ...more] = onlyJson(json.stdout)["cooldowns"] as CooldownEntry[];
  assert.deepEqual(more, []);
  assert.equal(entry?.fingerprint, "00aa11bb22cc33dd");
  assert.equal(entry?.status, 529);
  assert.equal(entry?.strikes, 1);
  assert.equal(entry?.probes, 0);
  assert.equal(entry?.probing, false);
  assertLeft(entry!.remainingMs);
  assert.ok(Math.abs(Date.parse(entry!.until) - Date.now() - entry!.remainingMs) < 5000, entry!.until);

  // `tenants` shows the same cooldowns: a credential's is shared by every tenant whose turns use it.
  const tenants = await turnstream(["tenants"], env);
  assert.match(tenants.stdout, /^ {2}credential 00aa11bb22cc33dd: 529, until /m);
  const tenantsJson = onlyJson((await turnstream(["tenants", "--json"], env)).stdout);
  assert.deepEqual(
    (tenantsJson["cooldowns"] as CooldownEntry[]).map((cooldown) => cooldown.fingerprint),
    ["00aa11bb22cc33dd"],
  );
  // A member anyone with Redis write access adds to the index is not listed.
  const bogus = "\u001b]0;pwned\u0007";
  await redis.zadd(`${prefix}{cooldown}:index`, Date.now() + 60_000, bogus);
  await redis.hset(`${prefix}{cooldown}:c:${bogus}`, { until: Date.now() + 60_000, status: 429, since: Date.now() });
  await redis.pexpire(`${prefix}{cooldown}:c:${bogus}`, 60_000);
  assert.equal((onlyJson((await turnstream(["status", "--json"], env)).stdout)["cooldowns"] as unknown[]).length, 1);

  await redis.del(...(await redis.keys(`${prefix}*`)));
  const cleared = await turnstream(["status"], env);
  assert.match(cleared.stdout, /^model cooldowns: none$/m);
  assert.deepEqual(onlyJson((await turnstream(["status", "--json"], env)).stdout)["cooldowns"], []);
});
