// The trust rules view in a real browser. Two rules come from operators' `always` decisions on calls a
// real hub was asked about (one allow with its pattern given, one deny whose pattern is the call
// itself: a command that is markup), one was added to the store without a decision, one is signed
// by a key the fleet does not trust. The view lists what `turnstream rules list --json` lists, in its
// order, with who added each, the session it came from and whether it verifies; the markup pattern
// stays text. Revoke (with a reason) as the logged-in operator records a signed `rule.revoked` where
// the rule's addition is recorded and takes the rule out of the store and the view; a rule no
// decision added cannot be revoked from here, and the page says why. Then the attacker over plain
// HTTP: no CSRF token, a cross-site or form POST, no login, a read-only console (which shows no
// button either), a rule named by anything but its id: all refused, nothing revoked. Under the rules,
// the recently revoked ones, as `turnstream rules list --revoked --json` lists them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { Browser } from "playwright-core";
import type { Dashboard, DashboardOptions } from "../../src/dashboard/index.ts";
import {
  RuleStore,
  ruleId,
  rulesKey,
  revokeRule,
  signRule,
  verifyRuleRevoked,
  type RevocationRow,
  type RuleRevoked,
  type SupervisedRun,
  type TrustRule,
} from "../../src/decisions/index.ts";
import {
  cli,
  decideAs,
  eventsOf,
  forward,
  nextEvent,
  prepare,
  putRule,
  revocableRule,
  setup,
  withHub,
  type Ctx,
} from "../decisions/_support.ts";
import { OPERATOR, operatorKey, stranger, trustedKeys } from "../support/operator-keys.ts";
import { launchBrowser, openPage, screenshot, signingConsole } from "./_browser.ts";
import { call, poster, type Poster } from "./_http.ts";

const HOSTILE_COMMAND = `<img src=x onerror="window.pwned=1">`;

/** One call forwarded to the hub as the CLI's hook does, decided `always` by erin: the rule it added. */
async function ruleFromDecision(
  ctx: Ctx,
  run: SupervisedRun,
  command: string,
  decision: { decision: "allow" | "deny"; rule?: string; reason?: string },
  fromSeq: number,
): Promise<{ rule: TrustRule; requestId: string; seq: number }> {
  const answer = forward(run, { command, description: "a step" });
  const requested = await nextEvent(ctx, "decision.requested", fromSeq);
  const requestId = (requested.data as { requestId: string }).requestId;
  const decided = await decideAs(ctx, { requestId, by: "erin", always: true, ...decision });
  assert.equal((await answer).permissionDecision, decision.decision);
  return { rule: decided.rule!, requestId, seq: decided.seq };
}

/** The four rules: two from decisions, one put in the store by hand, one signed by a stranger. */
async function seedRules(ctx: Ctx) {
  const run = prepare(ctx, await withHub(ctx));
  const allowGit = { decision: "allow" as const, rule: "Bash(git status:*)", reason: "read-only" };
  const git = await ruleFromDecision(ctx, run, "git status --short", allowGit, 1);
  const hostile = await ruleFromDecision(ctx, run, HOSTILE_COMMAND, { decision: "deny" }, git.seq + 1);
  run.close();
  const byHand = await putRule(ctx, "WebFetch(domain:example.com)", "allow", "carol");
  const foreignPattern = "Read(./secrets/**)";
  const foreign = signRule(stranger, {
    id: ruleId("deny", foreignPattern),
    pattern: foreignPattern,
    effect: "deny",
    by: "mallory",
    at: new Date().toISOString(),
  });
  await new RuleStore(ctx.redis, ctx.prefix).put(foreign);
  return { git, hostile, byHand, foreign };
}

const TOKEN = randomBytes(24).toString("base64url");

test("the rules view lists what `rules list` lists, a markup pattern as text; Revoke records a signed rule.revoked by the logged-in operator and the rule leaves store and view", async () => {
  const ctx = await setup();
  let dash: Dashboard | undefined;
  let browser: Browser | undefined;
  const errors: string[] = [];
  try {
    const { git, hostile, byHand, foreign } = await seedRules(ctx);
    assert.equal(hostile.rule.pattern, `Bash(${HOSTILE_COMMAND})`, "the pattern is the call itself");
    dash = await signingConsole(ctx, { operatorTokens: { dana: TOKEN }, operatorName: "not-the-login" });
    const listed = await cli(["rules", "list", "--json"], {
      TURNSTREAM_PREFIX: ctx.prefix,
      TURNSTREAM_OPERATOR_KEYS: OPERATOR.publicKey,
    });
    assert.equal(listed.code, 0, listed.stderr);
    const cliRules = JSON.parse(listed.stdout) as Array<TrustRule & { verified: boolean | null }>;
    assert.equal(cliRules.length, 4);

    browser = await launchBrowser();
    const page = await openPage(browser, errors);
    page.on("dialog", (dialog) => {
      errors.push(`dialog: ${dialog.message()}`);
      void dialog.dismiss();
    });
    await page.goto(`${dash.url}login`);
    await page.locator("#token").fill(TOKEN);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.waitForURL(dash.url);
    await page.goto(`${dash.url}#/rules`);
    const table = page.locator("#rule-table");
    await table.locator(`tr[data-rule="${foreign.id}"]`).waitFor({ timeout: 20_000 });

    // The same rules in the same order as the command, with the same verdicts.
    const shown = await table
      .locator("tbody tr")
      .evaluateAll((trs) => trs.map((tr) => [tr.getAttribute("data-rule"), tr.getAttribute("data-verified")]));
    assert.deepEqual(
      shown,
      cliRules.map((rule) => [rule.id, String(rule.verified)]),
    );
    const cells = (rule: TrustRule): Promise<string[]> =>
      table.locator(`tr[data-rule="${rule.id}"] td`).allInnerTexts();
    assert.deepEqual(await cells(git.rule), [
      git.rule.id,
      "allow",
      "Bash(git status:*)",
      `erin, ${git.rule.at}\nread-only`,
      `${ctx.session}\nrequest ${git.requestId}`,
      `verified ${operatorKey.keyId}`,
      "Revoke",
    ]);
    assert.equal(
      await table.locator(`tr[data-rule="${git.rule.id}"] a`).getAttribute("href"),
      `#/session/${ctx.session}`,
    );
    assert.deepEqual((await cells(hostile.rule)).slice(1, 3), ["deny", `Bash(${HOSTILE_COMMAND})`]);
    assert.deepEqual((await cells(byHand)).slice(3, 6), [
      `carol, ${byHand.at}`,
      "no decision (added by hand)",
      `verified ${operatorKey.keyId}`,
    ]);
    assert.deepEqual((await cells(foreign)).slice(5), [
      `does not verify its key ${stranger.keyId} is not one of this worker's operator keys; workers ignore it`,
      "Revoke",
    ]);
    // The markup in the pattern is text: no element was made of it and nothing ran.
    assert.equal(await page.locator("#rules img").count(), 0);
    await screenshot(page, "rules");

    // Revoke with a reason: recorded as the login's operator, signed, where the rule's addition is.
    const row = table.locator(`tr[data-rule="${git.rule.id}"]`);
    await row.getByRole("button", { name: "Revoke", exact: true }).click();
    await row.getByLabel("reason").fill("too broad");
    await row.getByRole("button", { name: "Revoke rule" }).click();
    const note = page.locator("#rules-note");
    await note.getByText(`${git.rule.id} allow Bash(git status:*): revoked by dana`).waitFor({ timeout: 20_000 });
    await row.waitFor({ state: "detached", timeout: 20_000 });
    await page.locator(`#revoked-table tr[data-revoked="${git.rule.id}"][data-verified="true"]`).waitFor();
    assert.deepEqual(
      (await new RuleStore(ctx.redis, ctx.prefix).list()).map((rule) => rule.id).sort(),
      [hostile.rule.id, byHand.id, foreign.id].sort(),
    );
    const [record] = await eventsOf(ctx, "rule.revoked");
    const [added] = (await eventsOf(ctx, "rule.added")).filter(
      (event) => (event.data as { ruleId: string }).ruleId === git.rule.id,
    );
    const revoked = record!.data as RuleRevoked;
    assert.deepEqual(
      [revoked.ruleId, revoked.pattern, revoked.by, revoked.reason, revoked.keyId, record!.turn, record!.attempt],
      [git.rule.id, "Bash(git status:*)", "dana", "too broad", operatorKey.keyId, added!.turn, added!.attempt],
    );
    assert.equal(verifyRuleRevoked(trustedKeys, revoked).ok, true);
    assert.equal(
      await note.locator("a").getAttribute("href"),
      `#/session/${ctx.session}/at/${record!.seq}`,
      "the note links the record",
    );
    assert.match(
      await note.innerText(),
      new RegExp(`signed with ${operatorKey.keyId}\\); rule.revoked at event ${record!.seq} of ${ctx.session}$`),
    );

    // A rule no decision added has no log to record its revocation in: refused, said, kept.
    const handRow = table.locator(`tr[data-rule="${byHand.id}"]`);
    await handRow.getByRole("button", { name: "Revoke", exact: true }).click();
    await handRow.getByRole("button", { name: "Revoke rule" }).click();
    await note
      .getByText(`refused: rule ${byHand.id} was not added by a decision in a session: name a session`)
      .waitFor({ timeout: 20_000 });
    assert.equal(await ctx.redis.hexists(rulesKey(ctx.prefix), byHand.id), 1);
    assert.equal(await handRow.count(), 1);
    assert.equal(await page.evaluate('"pwned" in window'), false);
    await screenshot(page, "rules-revoked");
    // The refusal's answer is the page's only error.
    assert.deepEqual(errors, [
      "console: Failed to load resource: the server responded with a status of 409 (Conflict)",
    ]);
  } finally {
    await browser?.close();
    await dash?.close();
    await ctx.cleanup();
  }
});

test("revoking is refused without the CSRF token, cross-site, as a form, without a login, on a read-only console (no button) and for anything but a rule's id", async () => {
  const ctx = await setup();
  const dashboards: Dashboard[] = [];
  // Each console names its own keys: none, one signing, or another's.
  const unsigned = { operatorKey: undefined, trustedKeys: undefined };
  const started = async (options: Partial<DashboardOptions>): Promise<Dashboard> => {
    const dash = await signingConsole(ctx, { ...unsigned, operatorName: "dana", ...options });
    dashboards.push(dash);
    return dash;
  };
  let browser: Browser | undefined;
  const errors: string[] = [];
  try {
    const signing = await started({ operatorKey, trustedKeys });
    const readOnly = await started({});
    const withLogin = await started({ operatorKey, operatorTokens: { dana: TOKEN } });
    const rule = await putRule(ctx, "Bash(git *)", "allow");
    // A bare tool name shaped like a rule id: revoking "by id" must not fall back to it as a pattern.
    const idShaped = await putRule(ctx, "rule-0123456789abcdef", "deny");
    // Written to Redis by hand: escapes, a secret in the reason, an id no decision makes.
    await ctx.redis.hset(
      rulesKey(ctx.prefix),
      "hand",
      JSON.stringify({
        id: "hand",
        pattern: "Bash(\u001b[31mrm -rf ~)",
        effect: "allow",
        by: "eve\u202e",
        at: new Date().toISOString(),
        reason: "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
      }),
    );
    const revoke = (post: Poster, id: string, csrf?: string) => post("api/rules/revoke", { id, reason: "x" }, csrf);

    const post = await poster(signing);
    const noToken = await revoke(post, rule.id, "wrong");
    assert.deepEqual([noToken.status, JSON.parse(noToken.body).error], [403, "missing or wrong CSRF token"]);
    const crossSite = await revoke(await poster(signing, { "Sec-Fetch-Site": "cross-site" }), rule.id);
    assert.deepEqual([crossSite.status, JSON.parse(crossSite.body).error], [403, "cross-site request"]);
    const form = await call(`${signing.url}api/rules/revoke`, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Origin: "http://evil.example" },
      body: `id=${rule.id}`,
    });
    assert.equal(form.status, 403);
    // Without a login there is no page, so no token either: whatever is sent, the login is asked for first.
    const noLogin = await call(`${withLogin.url}api/rules/revoke`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "X-Turnstream-CSRF": "guessed",
        Origin: withLogin.url.slice(0, -1),
      },
      body: JSON.stringify({ id: rule.id }),
    });
    assert.deepEqual([noLogin.status, JSON.parse(noLogin.body).error], [401, "log in first"]);
    const viewer = await revoke(await poster(readOnly), rule.id);
    assert.equal(viewer.status, 403);
    assert.match(JSON.parse(viewer.body).error, /read-only: start it with TURNSTREAM_OPERATOR_KEY/);
    const byPattern = await post("api/rules/revoke", { id: "Bash(git *)" });
    assert.equal(byPattern.status, 400);
    assert.match(byPattern.body, /id: not a rule id/);
    const whoSays = await post("api/rules/revoke", { id: rule.id, by: "someone else" });
    assert.equal(whoSays.status, 400, "who revokes is the login's, not the page's to say");
    const notAnId = await revoke(post, "rule-0123456789abcdef");
    assert.equal(notAnId.status, 404);
    assert.deepEqual(JSON.parse(notAnId.body), {
      error: 'no trust rule has the id "rule-0123456789abcdef"; list them with `turnstream rules list`',
      problem: "not_found",
    });
    assert.deepEqual(
      (await new RuleStore(ctx.redis, ctx.prefix).list()).map((stored) => stored.id).sort(),
      ["hand", idShaped.id, rule.id].sort(),
      "nothing was revoked",
    );
    assert.deepEqual(await eventsOf(ctx, "rule.revoked"), []);

    // What the page is sent of a hand-written rule: escaped, scrubbed, not offered for revoking.
    const listed = JSON.parse((await call(`${signing.url}api/rules`)).body) as {
      checked: boolean;
      rules: Array<{ id: string; pattern: string; by: string; reason: string; revocable: boolean; verified: boolean }>;
    };
    const hand = listed.rules.find((row) => row.id === "hand")!;
    assert.equal(listed.checked, true);
    assert.deepEqual(
      [hand.pattern, hand.by, hand.reason, hand.revocable, hand.verified],
      ["Bash(\\x1b[31mrm -rf ~)", "eve\\u202e", "token [REDACTED:github_token]", false, false],
    );

    // The read-only console shows the rules and no button.
    browser = await launchBrowser();
    const page = await openPage(browser, errors);
    await page.goto(`${readOnly.url}#/rules`);
    await page.locator(`#rule-table tr[data-rule="${rule.id}"]`).waitFor({ timeout: 20_000 });
    await page.getByText("read-only: start the dashboard with TURNSTREAM_OPERATOR_KEY to revoke rules").waitFor();
    assert.equal(await page.locator("#rule-table tbody tr").count(), 3);
    assert.equal(await page.locator("#rules button").count(), 0);
    assert.equal(
      await page.locator('#rule-table tr[data-rule="hand"] td').nth(5).innerText(),
      "unchecked not signed",
      "no keys here: unchecked",
    );
    assert.deepEqual(errors, []);
  } finally {
    await browser?.close();
    await Promise.all(dashboards.map((dash) => dash.close()));
    await ctx.cleanup();
  }
});

/** What the Recently revoked table shows of a row of `rules list --revoked --json`, cell by cell. */
function revokedCells(row: RevocationRow): string[] {
  const signature =
    row.verified === true ? `verified ${row.keyId}` : `does not verify ${row.why}; who revoked it is not proven`;
  return [
    row.ruleId,
    row.effect,
    row.pattern,
    row.addedBy,
    `${row.revokedBy}, ${row.revokedAt}${row.reason === null ? "" : `\n${row.reason}`}`,
    signature,
    `${row.session}\nevent ${row.seq}`,
  ];
}

test("Recently revoked shows what `rules list --revoked --json` lists, cell for cell, each linking its record", async () => {
  const ctx = await setup();
  let dash: Dashboard | undefined;
  let browser: Browser | undefined;
  const errors: string[] = [];
  try {
    const signed = await revocableRule(ctx, "Bash(git push:*)");
    const unsigned = await revocableRule(ctx, "Read(./secrets/**)", "deny");
    await revokeRule({ log: ctx.log }, { rule: signed.id, by: "erin", reason: "too broad", operatorKey });
    await revokeRule({ log: ctx.log }, { rule: unsigned.id, by: "olga" });
    const listed = await cli(["rules", "list", "--revoked", "--json"], {
      TURNSTREAM_PREFIX: ctx.prefix,
      TURNSTREAM_OPERATOR_KEYS: OPERATOR.publicKey,
    });
    assert.equal(listed.code, 0, listed.stderr);
    const rows = (JSON.parse(listed.stdout) as { revocations: RevocationRow[] }).revocations;
    assert.deepEqual(
      rows.map((row) => [row.ruleId, row.verified]),
      [
        [unsigned.id, false],
        [signed.id, true],
      ],
    );

    dash = await signingConsole(ctx);
    browser = await launchBrowser();
    const page = await openPage(browser, errors);
    await page.goto(`${dash.url}#/rules`);
    const table = page.locator("#revoked-table");
    await table.locator(`tr[data-revoked="${signed.id}"]`).waitFor({ timeout: 20_000 });
    await page.getByRole("heading", { name: "Recently revoked" }).waitFor();
    const shown = await table
      .locator("tbody tr")
      .evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.innerText)));
    assert.deepEqual(shown, rows.map(revokedCells));
    const links = await table.locator("tbody tr a").evaluateAll((as) => as.map((a) => a.getAttribute("href")));
    assert.deepEqual(
      links,
      rows.map((row) => `#/session/${row.session}/at/${row.seq}`),
    );
    await screenshot(page, "rules-recently-revoked");
    assert.deepEqual(errors, []);
  } finally {
    await browser?.close();
    await dash?.close();
    await ctx.cleanup();
  }
});
