// The attacker against the Rules view. A logged-in operator's browser opens a page of another origin
// (another port of the same host: the same site, so the login cookie goes along) that frames the
// console and posts revocations every way a page can: a no-cors fetch, a CORS fetch with a guessed
// CSRF token, a text/plain form shaped like JSON. A DNS-rebound host name reaches a console without
// logins. Every text of a rule written into Redis by hand carries markup, quotes and a `javascript:`
// session; the note a revocation leaves shows a markup pattern. Entries written into the index of recent
// revocations by hand stay text and do not verify. Nothing is revoked, nothing runs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { Browser } from "playwright-core";
import { listen } from "../../src/kernel/index.ts";
import type { Dashboard } from "../../src/dashboard/index.ts";
import { RuleStore, rulesKey } from "../../src/decisions/index.ts";
import { MARKUP as REVOKED_MARKUP, plantRevocations } from "../decisions/_revocations.ts";
import { eventsOf, putRule, revocableRule, setup } from "../decisions/_support.ts";
import { launchBrowser, openPage, signingConsole } from "./_browser.ts";
import { call, poster } from "./_http.ts";

const TOKEN = randomBytes(24).toString("base64url");
const MARKUP = `"><img src=x onerror="window.pwned=1"><script>window.pwned=2</script>`;

/** The attacker's page: frames the console and posts a revocation of `id` three ways. */
function attackerPage(dashboard: string, id: string): string {
  const body = JSON.stringify({ id, reason: "attacker" });
  const [formName, formValue] = [body.slice(0, -2) + ',"x":"', '"}'];
  return `<!doctype html><html><body>
<iframe id="framed" src="${dashboard}#/rules" width="800" height="400"></iframe>
<form id="form" method="POST" action="${dashboard}api/rules/revoke" enctype="text/plain" target="sink">
<input name='${formName}' value='${formValue}'></form><iframe name="sink"></iframe>
<script>
window.results = [];
const url = ${JSON.stringify(`${dashboard}api/rules/revoke`)};
const record = (how, p) => p.then((r) => window.results.push(how + " " + r.status + " " + r.type), (e) => window.results.push(how + " threw"));
record("no-cors", fetch(url, { method: "POST", mode: "no-cors", credentials: "include", body: ${JSON.stringify(body)} }));
record("cors", fetch(url, { method: "POST", credentials: "include", headers: { "content-type": "application/json", "x-turnstream-csrf": "guess" }, body: ${JSON.stringify(body)} }));
document.getElementById("form").submit();
setTimeout(() => window.results.push("done"), 1500);
</script></body></html>`;
}

test("a page of another origin in the operator's own browser cannot revoke, frame the console or read rules", async () => {
  const ctx = await setup();
  let dash: Dashboard | undefined;
  let browser: Browser | undefined;
  const seen: Array<{ method: string; site: string | undefined }> = [];
  const attacker = createServer();
  try {
    const rule = await revocableRule(ctx, "Bash(npm test:*)");
    dash = await signingConsole(ctx, { operatorTokens: { dana: TOKEN } });
    const dashboard = dash.url;
    attacker.on("request", (req, res) => {
      res.setHeader("content-type", "text/html");
      res.end(attackerPage(dashboard, rule.id));
    });
    const { port } = await listen(attacker, 0, "127.0.0.1");

    browser = await launchBrowser();
    const page = await openPage(browser, []);
    await page.goto(`${dash.url}login`);
    await page.locator("#token").fill(TOKEN);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.waitForURL(dash.url);
    page.on("request", (request) => {
      if (request.url().includes("/api/rules/revoke"))
        seen.push({ method: request.method(), site: request.headers()["sec-fetch-site"] });
    });
    await page.goto(`http://127.0.0.1:${port}/`);
    await page.waitForFunction("window.results && window.results.includes('done')", undefined, { timeout: 20_000 });
    const results = (await page.evaluate("window.results")) as string[];
    // Answered with nothing the page can read: an opaque answer, or a closed connection.
    assert.ok(
      results.some((r) => r === "no-cors 0 opaque" || r === "no-cors threw"),
      results.join(", "),
    );
    assert.ok(results.includes("cors threw"), "the preflight is not answered for another origin");
    assert.ok(seen.length >= 2, JSON.stringify(seen));
    assert.ok(
      seen.every((request) => request.site !== "same-origin"),
      "the browser says where they came from",
    );

    const framed = page.frames().find((frame) => frame.url().startsWith(dash!.url));
    assert.equal(
      (await framed
        ?.locator("#rules")
        .count()
        .catch(() => 0)) ?? 0,
      0,
      "the console refuses to be framed",
    );
    assert.deepEqual(
      (await new RuleStore(ctx.redis, ctx.prefix).list()).map((kept) => kept.id),
      [rule.id],
      "nothing was revoked",
    );
    assert.deepEqual(await eventsOf(ctx, "rule.revoked"), []);

    // The same rule, revoked by the operator's own page: the guard, not a missing log, stopped the attacker.
    const post = await poster(dash, { Cookie: await loginCookie(dash) });
    assert.equal((await post("api/rules/revoke", { id: rule.id })).status, 200);
  } finally {
    attacker.close();
    await browser?.close();
    await dash?.close();
    await ctx.cleanup();
  }
});

async function loginCookie(dash: Dashboard): Promise<string> {
  const answer = await call(`${dash.url}login`, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Origin: dash.url.slice(0, -1) },
    body: `token=${encodeURIComponent(TOKEN)}`,
  });
  const cookie = [answer.headers["set-cookie"] ?? []].flat()[0];
  assert.ok(cookie !== undefined, `login answered ${answer.status}`);
  return cookie.split(";")[0]!;
}

test("a DNS-rebound host name gets nothing from a console without logins: no page, no token, no revocation", async () => {
  const ctx = await setup();
  let dash: Dashboard | undefined;
  try {
    const rule = await revocableRule(ctx, "Bash(make:*)");
    dash = await signingConsole(ctx);
    const { port } = new URL(dash.url);
    const rebound = `rebind.attacker.example:${port}`;
    const asRebound = { Host: rebound, Origin: `http://${rebound}`, "Sec-Fetch-Site": "same-origin" };
    assert.equal((await call(dash.url, { headers: asRebound })).status, 421);
    assert.equal((await call(`${dash.url}api/rules`, { headers: asRebound })).status, 421);
    const revoke = await call(`${dash.url}api/rules/revoke`, {
      method: "POST",
      headers: { ...asRebound, "Content-Type": "application/json", "X-Turnstream-CSRF": "guess" },
      body: JSON.stringify({ id: rule.id }),
    });
    assert.equal(revoke.status, 421);
    assert.equal(await ctx.redis.hexists(rulesKey(ctx.prefix), rule.id), 1);
  } finally {
    await dash?.close();
    await ctx.cleanup();
  }
});

test("markup in every text of a rule stays text, in the list and in the note a revocation leaves", async () => {
  const ctx = await setup();
  let dash: Dashboard | undefined;
  let browser: Browser | undefined;
  try {
    const revocable = await revocableRule(ctx, `Bash(${MARKUP})`);
    await putRule(ctx, `WebFetch(${MARKUP})`, "deny", MARKUP);
    await ctx.redis.hset(
      rulesKey(ctx.prefix),
      MARKUP,
      JSON.stringify({
        id: MARKUP,
        pattern: MARKUP,
        effect: "allow",
        by: MARKUP,
        at: new Date().toISOString(),
        reason: MARKUP,
        keyId: MARKUP,
        source: { session: "javascript:window.pwned=3", requestId: MARKUP },
      }),
    );
    dash = await signingConsole(ctx, { operatorName: "dana" });
    browser = await launchBrowser();
    const page = await openPage(browser, []);
    await page.goto(`${dash.url}#/rules`);
    const table = page.locator("#rule-table");
    await table.locator(`tr[data-rule="${revocable.id}"]`).waitFor({ timeout: 20_000 });
    assert.equal(await table.locator("tbody tr").count(), 3);
    assert.equal(await page.locator("#rules img, #rules script").count(), 0);
    assert.equal(await table.locator('a[href^="javascript"]').count(), 0, "an odd session is no link");
    const handRow = table.locator("tbody tr").filter({ hasText: "javascript:window.pwned=3" });
    assert.equal(await handRow.count(), 1);
    assert.ok((await handRow.innerText()).includes(MARKUP), "shown as the text it is");

    const row = table.locator(`tr[data-rule="${revocable.id}"]`);
    await row.getByRole("button", { name: "Revoke", exact: true }).click();
    await row.getByLabel("reason").fill(MARKUP);
    await row.getByRole("button", { name: "Revoke rule" }).click();
    await row.waitFor({ state: "detached", timeout: 20_000 });
    assert.ok((await page.locator("#rules-note").innerText()).includes(`Bash(${MARKUP})`));
    assert.equal(await page.locator("#rules img, #rules script").count(), 0);
    assert.equal(await page.evaluate('"pwned" in window'), false);
  } finally {
    await browser?.close();
    await dash?.close();
    await ctx.cleanup();
  }
});

test("entries written into the index of revocations by hand: markup and controls stay escaped text, forged records do not verify, junk is counted", async () => {
  const ctx = await setup();
  let dash: Dashboard | undefined;
  let browser: Browser | undefined;
  const errors: string[] = [];
  try {
    const planted = await plantRevocations(ctx.redis, ctx.prefix, ctx.session);
    dash = await signingConsole(ctx);
    browser = await launchBrowser();
    const page = await openPage(browser, errors);
    await page.goto(`${dash.url}#/rules`);
    const table = page.locator("#revoked-table");
    await table.locator("tbody tr[data-revoked]").first().waitFor({ timeout: 20_000 });
    assert.deepEqual(
      await table
        .locator("tbody tr")
        .evaluateAll((trs) => trs.map((tr) => [tr.getAttribute("data-revoked"), tr.getAttribute("data-verified")])),
      [planted.swapped, planted.forged, planted.hostile].map((entry) => [entry.rule.id, "false"]),
    );
    const hostile = await table.locator(`tr[data-revoked="${planted.hostile.rule.id}"] td`).allInnerTexts();
    assert.deepEqual(hostile.slice(2, 5), [
      `Bash(${REVOKED_MARKUP}\\x1b[31m)`,
      `eve\\u202e${REVOKED_MARKUP}`,
      // The reason keeps its newline (a browser lays it out as a space); its controls are escaped.
      `eve\\u202e${REVOKED_MARKUP}, ${planted.hostile.revoked.revokedAt}\nfirst \\x1b]0;owned\\x07${REVOKED_MARKUP}`,
    ]);
    assert.equal(hostile[6], "javascript:window.pwned=2\nevent 1", "an odd session is shown, not linked");
    assert.match(
      await table.locator(`tr[data-revoked="${planted.forged.rule.id}"] td`).nth(5).innerText(),
      /^does not verify its signature does not match/,
    );
    assert.match(
      await table.locator(`tr[data-revoked="${planted.swapped.rule.id}"] td`).nth(5).innerText(),
      /^does not verify its record names another rule/,
    );
    assert.equal(
      await page.locator("#revoked-unreadable").innerText(),
      `${planted.malformed} entries of the index are not revocations: not shown`,
    );
    assert.equal(await page.locator("#rules img, #rules script").count(), 0);
    assert.equal(await table.locator('a[href^="javascript"]').count(), 0);
    assert.equal(await page.evaluate('"pwned" in window'), false);
    assert.deepEqual(errors, []);
  } finally {
    await browser?.close();
    await dash?.close();
    await ctx.cleanup();
  }
});
