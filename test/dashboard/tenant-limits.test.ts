// The tenants view in a real browser: the same tenants and figures as `turnstream tenants --json`
// (budget, spend and its share, running turns and their limit, the policy, whether the limits verify
// and who set them), a forged record marked as not verifying, names written to Redis by hand shown
// escaped and scrubbed. Sign and set writes limits signed with the dashboard's operator key as the
// logged-in operator, which a worker trusting that key accepts, and the view shows them without a
// reload; Clear removes them. Then the routes over plain HTTP: the decision guards apply, bad values
// and secret-shaped names are refused, and a console without a key, or with a key the fleet does not
// trust, changes nothing.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startDashboard } from "../../src/dashboard/index.ts";
import {
  limitsFromRecord,
  readLimitsRecord,
  signTenantLimits,
  TenantLedger,
  tenantLimitsKey,
  tenantsSeenKey,
  writeLimits,
  type TenantRow,
} from "../../src/tenants/index.ts";
import { OPERATOR, operatorKey, stranger, trustedKeys } from "../support/operator-keys.ts";
import { cleanupKeys, redisFor, testSpace, type TestSpace } from "../worker/_support.ts";
import { createEventLog, type RedisClient } from "../../src/log/index.ts";
import { onlyJson, turnstream } from "../bin/_cli.ts";
import { launchBrowser, openPage, screenshot } from "./_browser.ts";
import { poster } from "./_http.ts";

const HOSTILE = "evil\u001b[31m\u202eowned";
const SECRET_SHAPED = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";

/** Limits, spend and running turns of a few tenants, one record forged and two names written by hand. */
async function seed(redis: RedisClient, space: TestSpace): Promise<void> {
  const at = new Date().toISOString();
  const sign = (tenant: string, limits: { budgetUsd?: number; maxRunning?: number; overBudget: "wait" | "fail" }) =>
    signTenantLimits(operatorKey, { tenant, ...limits, by: "ops", at });
  await writeLimits(redis, space.logPrefix, sign("acme/api", { budgetUsd: 2, maxRunning: 3, overBudget: "fail" }));
  const edited = sign("edited", { budgetUsd: 1, overBudget: "wait" });
  await redis.hset(tenantLimitsKey(space.logPrefix), "edited", JSON.stringify({ ...edited, budgetUsd: 500 }));
  const ledger = new TenantLedger(redis, space.logPrefix);
  await ledger.spend("acme/api", "call-1", 2.25);
  assert.equal((await ledger.reserve("acme/api", "lease-a", 120_000, { overBudget: "wait" })).status, "ok");
  assert.equal((await ledger.reserve("beta", "lease-b", 120_000, { overBudget: "wait" })).status, "ok");
  await redis.zadd(tenantsSeenKey(space.logPrefix), Date.now(), HOSTILE, Date.now(), SECRET_SHAPED);
}

test("the tenants view shows the figures of `tenants --json`, forged limits as not verifying, hostile names escaped; Sign and set and Clear change them live", async () => {
  const space = testSpace();
  const redis = redisFor();
  await seed(redis, space);
  const dash = await startDashboard({
    redis,
    prefix: space.logPrefix,
    queuePrefix: space.queuePrefix,
    operatorKey,
    trustedKeys,
    operatorName: "dana",
  });
  const browser = await launchBrowser();
  const errors: string[] = [];
  try {
    const cli = await turnstream(["tenants", "--json"], {
      TURNSTREAM_PREFIX: space.logPrefix,
      TURNSTREAM_OPERATOR_KEYS: OPERATOR.publicKey,
    });
    assert.equal(cli.code, 0, cli.stderr);
    const rows = (onlyJson(cli.stdout) as { tenants: TenantRow[] }).tenants;

    const page = await openPage(browser, errors);
    await page.goto(`${dash.url}#/tenants`);
    const table = page.locator("#tenant-table");
    await table.locator('tr[data-tenant="acme/api"]').waitFor({ timeout: 20_000 });
    // The same tenants, in the same order, as the command lists.
    const shown = await table.locator("tbody tr").evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-tenant")));
    assert.deepEqual(
      shown,
      rows.map((row) => row.tenant),
    );
    const cells = async (tenant: string): Promise<string[]> =>
      table.locator(`tr[data-tenant="${tenant}"] td`).allInnerTexts();
    const acme = rows.find((row) => row.tenant === "acme/api")!;
    assert.deepEqual((await cells("acme/api")).slice(0, 6), [
      "acme/api",
      "$2.00",
      "$2.25 (112.5%, over)",
      "1/3",
      "fail",
      `verified ${acme.keyId}, set by ${acme.setBy} at ${acme.setAt}`,
    ]);
    assert.deepEqual((await cells("beta")).slice(0, 6), [
      "beta",
      "default",
      "$0.00",
      "1/default",
      "default",
      "none: the workers' defaults",
    ]);
    const edited = await cells("edited");
    assert.deepEqual(edited.slice(1, 5), ["–", "$0.00", "0/–", "–"], "a forged record's claims are not shown");
    assert.match(edited[5]!, /^does not verify the signature of tenant edited's limits does not match; workers fail/);
    // Hand-written names: escaped and scrubbed, as the command shows them.
    const text = await table.innerText();
    assert.doesNotMatch(text, /[\u001b\u202e]/);
    assert.ok(!text.includes(SECRET_SHAPED.slice(4)));
    assert.match(text, /evil\\x1b\[31m\\u202eowned \(not a valid tenant name: written to Redis by hand\)/);
    assert.match(text, /\[REDACTED:github_token\]/);
    // Not names the server would take back: no Edit, no Clear.
    for (const row of [
      table.locator("tr", { hasText: "not a valid tenant name" }),
      table.locator("tr", { hasText: "[REDACTED:github_token]" }),
    ])
      assert.equal(await row.locator("button").count(), 0, await row.innerText());
    await screenshot(page, "tenants");

    // Spend counted while a session moves: the view follows without a reload.
    await new TenantLedger(redis, space.logPrefix).spend("beta", "call-b", 0.4);
    await createEventLog({ redis, prefix: space.logPrefix }).beginAttempt("s-tenants-live", "t1");
    await table.locator('tr[data-tenant="beta"]', { hasText: "$0.40" }).waitFor({ timeout: 20_000 });

    // Edit fills the form from the row; the operator changes it and signs.
    await table.locator('tr[data-tenant="acme/api"]').getByRole("button", { name: "Edit" }).click();
    const form = page.locator("#tenant-form");
    assert.equal(await form.getByLabel("tenant").inputValue(), "acme/api");
    assert.equal(await form.getByLabel("budget USD per 24 hours").inputValue(), "2");
    assert.equal(await form.getByLabel("max running").inputValue(), "3");
    assert.equal(await form.getByLabel("when over budget").inputValue(), "fail");
    await form.getByLabel("tenant").fill("newco");
    await form.getByLabel("budget USD per 24 hours").fill("7.5");
    await form.getByLabel("max running").fill("");
    await form.getByLabel("when over budget").selectOption("wait");
    await form.getByRole("button", { name: "Sign and set" }).click();
    await page
      .locator("#tenant-note")
      .getByText(`newco: limits set by dana, signed with ${operatorKey.keyId}`)
      .waitFor({ timeout: 20_000 });
    const newco = table.locator('tr[data-tenant="newco"]');
    await newco.waitFor({ timeout: 20_000 });
    assert.match(
      await newco.innerText(),
      /\$7\.50\s+\$0\.00 \(0%\)\s+0\/none\s+wait\s+verified op-[0-9a-f]+, set by dana/,
    );
    // What a worker trusting the dashboard's key makes of it.
    const verdict = limitsFromRecord("newco", await readLimitsRecord(redis, space.logPrefix, "newco"), trustedKeys);
    assert.deepEqual(
      { ...verdict, version: undefined },
      {
        ok: true,
        signed: true,
        limits: { budgetUsd: 7.5, maxRunning: undefined, overBudget: "wait" },
        version: undefined,
      },
    );

    await table.locator('tr[data-tenant="acme/api"]').getByRole("button", { name: "Clear" }).click();
    await page.locator("#tenant-note").getByText("acme/api: limits cleared").waitFor({ timeout: 20_000 });
    await table.locator('tr[data-tenant="acme/api"][data-limits="none"]').waitFor({ timeout: 20_000 });
    // Cleared by a signed record that says so (a deleted one would hold the tenant's turns back).
    const cleared = JSON.parse((await readLimitsRecord(redis, space.logPrefix, "acme/api"))!) as { cleared?: boolean };
    assert.equal(cleared.cleared, true);
    assert.equal(
      await table.locator('tr[data-tenant="beta"]').getByRole("button", { name: "Clear" }).count(),
      0,
      "nothing to clear",
    );
    await screenshot(page, "tenants-changed");
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
    await dash.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});

test("the tenants routes: the decision guards, bad values and secret-shaped names refused, no key or an untrusted one changes nothing", async () => {
  const space = testSpace();
  const redis = redisFor();
  const common = { redis, prefix: space.logPrefix, queuePrefix: space.queuePrefix, operatorName: "dana" };
  const signing = await startDashboard({ ...common, operatorKey, trustedKeys });
  const readOnly = await startDashboard(common);
  const untrusted = await startDashboard({ ...common, operatorKey: stranger, trustedKeys });
  try {
    const post = await poster(signing);
    assert.equal((await post("api/tenants/set", { tenant: "acme", budgetUsd: 5 }, "wrong")).status, 403);
    assert.equal((await post("api/tenants/clear", { tenant: "acme" }, "wrong")).status, 403);
    const negative = await post("api/tenants/set", { tenant: "acme", budgetUsd: -1 });
    assert.equal(negative.status, 400);
    assert.match(negative.body, /budgetUsd: /);
    const fractional = await post("api/tenants/set", { tenant: "acme", maxRunning: 1.5 });
    assert.equal(fractional.status, 400);
    assert.match(fractional.body, /maxRunning: /);
    const extra = await post("api/tenants/set", { tenant: "acme", by: "someone else" });
    assert.equal(extra.status, 400, "who sets them is the login's, not the page's to say");
    const badName = await post("api/tenants/clear", { tenant: "bad\u001bname" });
    assert.equal(badName.status, 400);
    assert.doesNotMatch(badName.body, /\u001b/);
    const secret = await post("api/tenants/set", { tenant: SECRET_SHAPED, budgetUsd: 5 });
    assert.equal(secret.status, 400);
    assert.match(secret.body, /looks like a secret \(github_token\)/);
    assert.ok(!secret.body.includes(SECRET_SHAPED.slice(4)));

    const noKey = await (await poster(readOnly))("api/tenants/set", { tenant: "acme", budgetUsd: 5 });
    assert.equal(noKey.status, 503);
    assert.match(noKey.body, /TURNSTREAM_OPERATOR_KEY/);
    assert.equal((await (await poster(readOnly))("api/tenants/clear", { tenant: "acme" })).status, 503);
    const strangers = await (await poster(untrusted))("api/tenants/set", { tenant: "acme", budgetUsd: 5 });
    assert.equal(strangers.status, 409);
    assert.match(strangers.body, new RegExp(`${stranger.keyId} is not one of TURNSTREAM_OPERATOR_KEYS`));
    assert.equal(await redis.exists(tenantLimitsKey(space.logPrefix)), 0, "nothing was written");

    const set = await post("api/tenants/set", { tenant: "acme", maxRunning: 2 });
    assert.equal(set.status, 200, set.body);
    assert.deepEqual((({ at: _at, ...rest }) => rest)(JSON.parse(set.body) as Record<string, unknown>), {
      tenant: "acme",
      maxRunning: 2,
      overBudget: "wait",
      by: "dana",
      keyId: operatorKey.keyId,
    });
    const cleared = await post("api/tenants/clear", { tenant: "acme" });
    assert.deepEqual([cleared.status, JSON.parse(cleared.body)], [200, { tenant: "acme", cleared: true }]);
  } finally {
    await Promise.all([signing.close(), readOnly.close(), untrusted.close()]);
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});
