// The decisions inbox in a real browser: a supervised turn's Bash call that nobody answers parks, and
// appears in the open inbox as parked, with how long it has waited and its deadline, without a reload
// (and its session in the open sessions list, its turn in the open queue view, both parked); Deny
// records a signed decision with the operator's name, the turn resumes, and the session page shows it
// ending with the denial in its transcript. Then the console's guards, over plain HTTP: decisions
// need the page's CSRF token and a same-origin request, a loopback console refuses a foreign Host,
// and a non-loopback one needs an operator token, which never appears in a URL and names who
// decides.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { parseTokens, startDashboard, type Dashboard } from "../../src/dashboard/index.ts";
import { pendingKey } from "../../src/decisions/index.ts";
import { OPERATOR, operatorKey } from "../decisions/_support.ts";
import { rig } from "../worker/_more.ts";
import { PARKING } from "../worker/_parked.ts";
import { launchBrowser, openPage, screenshot } from "./_browser.ts";
import { call } from "./_http.ts";

const touch = (file: string) => ({
  content: [
    { type: "tool_use" as const, name: "Bash", input: { command: `touch ${file}`, description: "create a file" } },
  ],
});

test("a parked decision appears live in the inbox with its age and deadline; Deny resumes the turn and ends it with the denial in its transcript", async () => {
  const testRig = await rig((ws: string) => ({
    responses: [touch(join(ws, "denied.txt")), { content: [{ type: "text", text: "the call was refused" }] }],
  }));
  testRig.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING });
  const dash = await startDashboard({
    redis: testRig.redis,
    prefix: testRig.space.logPrefix,
    queuePrefix: testRig.space.queuePrefix,
    operatorKey,
    operatorName: "dana",
  });
  const browser = await launchBrowser();
  const errors: string[] = [];
  try {
    // A request whose worker is gone (no hub heartbeat): listed, marked abandoned, not decidable.
    const gone = {
      session: "s-gone",
      requestId: "dr-gone",
      turn: "t_gone",
      attempt: 1,
      epoch: 1,
      seq: 3,
      tool: "Write",
      riskClass: "write" as const,
      input: "/etc/motd",
      hubId: "hub-gone",
      requestedAt: new Date(Date.now() - 1000).toISOString(),
      expiresAt: new Date(Date.now() + 60_000).toISOString(),
    };
    await testRig.redis.hset(pendingKey(testRig.space.logPrefix), "s-gone/dr-gone", JSON.stringify(gone));
    const page = await openPage(browser, errors);
    await page.goto(`${dash.url}#/decisions`);
    const abandoned = page.locator('.pending-card[data-status="abandoned"]');
    await abandoned.waitFor({ timeout: 20_000 });
    assert.match(await abandoned.innerText(), /Write[\s\S]*abandoned/);
    assert.ok(
      await abandoned.getByRole("button", { name: "Deny", exact: true }).isDisabled(),
      "an abandoned request cannot be decided",
    );
    await page.getByText("deciding as dana").waitFor();
    // Two more views left open, to see the new session and its queued turn arrive without a reload.
    const list = await openPage(browser, errors);
    await list.goto(`${dash.url}#/sessions`);
    await list.getByText("0 of 0 sessions").waitFor({ timeout: 20_000 });
    const queue = await openPage(browser, errors);
    await queue.goto(`${dash.url}#/queue`);
    await queue.getByText("nothing waiting, running or failed").waitFor({ timeout: 20_000 });

    const queued = await testRig.producer.enqueueTurn({
      prompt: "make denied.txt",
      cwd: testRig.ws,
      options: { supervised: true },
    });
    // Unanswered within the worker's answer window, the call parks: the card says so, how long it has
    // waited and when its deadline denies it.
    const card = page.locator('.pending-card[data-status="parked"]');
    await card.waitFor({ timeout: 60_000 });
    assert.match(await card.locator("h3").innerText(), /Bash/);
    assert.match(await card.locator("h3 .badge.s-parked").innerText(), /^parked$/);
    assert.match(await card.locator("h3 .timing").innerText(), /^parked \d+s · deadline .+ \([78]h\d\dm left\)$/);
    assert.match(await card.locator("pre.input").innerText(), /touch .*denied\.txt/);
    assert.match(await card.innerText(), /make denied\.txt/, "the turn's prompt is shown as context");
    assert.match(await page.locator("#pending-count").innerText(), /^1$/, "abandoned requests are not counted");
    // The session's page, open while the call waits: the call is there, its result not yet.
    const sessionPage = await openPage(browser, errors);
    await sessionPage.goto(`${dash.url}#/session/${queued.session}`);
    const turn = sessionPage.locator(`section.turn[data-turn="${queued.turn}"]`);
    await turn.locator('.tool[data-tool="Bash"]', { hasText: "no result yet" }).waitFor({ timeout: 20_000 });
    assert.match(await turn.locator(".requests").innerText(), /Bash\s+parked/);
    await turn.locator(".turn-head .badge", { hasText: "parked" }).waitFor({ timeout: 20_000 });
    await screenshot(page, "inbox-parked");
    const row = list.locator(`tr[data-session="${queued.session}"]`);
    await row.locator(".badge", { hasText: "parked" }).waitFor({ timeout: 20_000 });
    assert.match(await row.innerText(), /\t1\t/, "one turn");
    await queue
      .locator("#queue tr", { hasText: queued.turn })
      .locator(".badge", { hasText: "parked" })
      .waitFor({ timeout: 20_000 });
    assert.match(await queue.locator("#queue tr", { hasText: queued.turn }).innerText(), new RegExp(queued.session));
    await screenshot(queue, "queue-parked");

    await card.getByLabel("reason").fill("not on my watch");
    await card.getByRole("button", { name: "Deny", exact: true }).click();
    await page
      .locator("#decided")
      .getByText(/deny recorded by dana/)
      .waitFor({ timeout: 20_000 });
    const result = await testRig.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 });
    assert.equal(result.status, "finished");
    assert.equal(existsSync(join(testRig.ws, "denied.txt")), false, "the denied call did not run");
    const made = (await testRig.events(queued.session)).find((e) => e.kind === "decision.made");
    const data = made?.data as { by?: string; decision?: string; keyId?: string; signature?: string; reason?: string };
    assert.equal(data.by, "dana");
    assert.equal(data.decision, "deny");
    assert.equal(data.reason, "not on my watch");
    assert.ok(data.keyId?.startsWith("op-") && typeof data.signature === "string", "signed with the operator key");

    await row.locator(".badge", { hasText: "finished" }).waitFor({ timeout: 20_000 });
    assert.match(await row.innerText(), /\$0\.\d{4}/, "its cost");
    await list.locator('select[aria-label="filter by status"]').selectOption("failed");
    await list.getByText("0 of 1 sessions").waitFor();
    await list.locator('select[aria-label="filter by status"]').selectOption("all");
    await list.getByLabel("search sessions by id").fill(queued.session.slice(2, 8));
    await list.getByText("1 of 1 sessions").waitFor();
    await screenshot(list, "sessions-finished");
    // The open session page followed along: the turn ended with the denial in its transcript.
    await turn.locator(".turn-head .badge", { hasText: "finished" }).waitFor({ timeout: 20_000 });
    const denied = turn.locator('.tool[data-tool="Bash"] .result.err');
    assert.match(String(await denied.textContent()), /not on my watch/);
    assert.match(await turn.locator(".requests").innerText(), /Bash\s+decided\s+deny by dana/);
    assert.match(String(await turn.textContent()), /the call was refused/);
    await screenshot(sessionPage, "session-denied");
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
    await dash.close();
    await testRig.dispose();
  }
});

const decision = JSON.stringify({ session: "s-nope", requestId: "r-nope", decision: "allow" });

test("state changes need the page's CSRF token and a same-origin request; loopback refuses a foreign Host", async () => {
  const testRig = await rig({ responses: [] });
  const dash: Dashboard = await startDashboard({
    redis: testRig.redis,
    prefix: testRig.space.logPrefix,
    queuePrefix: testRig.space.queuePrefix,
    operatorKey,
    operatorName: "dana",
  });
  try {
    const html = await call(dash.url);
    assert.equal(html.status, 200);
    assert.match(String(html.headers["content-security-policy"]), /default-src 'self'/);
    assert.doesNotMatch(html.body, /<script>|<script [^>]*>[^<]/, "no inline script");
    const csrf = /<meta name="ts-csrf" content="([^"]+)">/.exec(html.body)?.[1];
    assert.ok(csrf !== undefined && csrf.length >= 24);
    const json = { "Content-Type": "application/json" };
    const api = `${dash.url}api/decide`;
    assert.equal((await call(api, { method: "POST", headers: json, body: decision })).status, 403, "no CSRF header");
    assert.equal(
      (await call(api, { method: "POST", headers: { ...json, "X-Turnstream-CSRF": "wrong" }, body: decision })).status,
      403,
    );
    const ok = { ...json, "X-Turnstream-CSRF": csrf };
    assert.equal(
      (await call(api, { method: "POST", headers: { ...ok, Origin: "https://evil.example" }, body: decision })).status,
      403,
      "cross-origin",
    );
    assert.equal(
      (await call(api, { method: "POST", headers: { ...ok, "Sec-Fetch-Site": "cross-site" }, body: decision })).status,
      403,
      "cross-site",
    );
    assert.equal(
      (
        await call(api, {
          method: "POST",
          headers: { "Content-Type": "text/plain", "X-Turnstream-CSRF": csrf },
          body: decision,
        })
      ).status,
      403,
      "a simple (form-like) request",
    );
    // With every check passed the decision reaches `decide`, which finds no such request.
    const through = await call(api, {
      method: "POST",
      headers: { ...ok, Origin: dash.url.slice(0, -1), "Sec-Fetch-Site": "same-origin" },
      body: decision,
    });
    assert.equal(through.status, 409, through.body);
    assert.match(through.body, /not_found/);
    // Bodies the page never sends are refused before any decision is looked for, saying what is wrong.
    const sameOrigin = { ...ok, Origin: dash.url.slice(0, -1) };
    const refusedBody = (body: string) => call(api, { method: "POST", headers: sameOrigin, body });
    const notJson = await refusedBody("{decision: allow");
    assert.deepEqual([notJson.status, JSON.parse(notJson.body)], [400, { error: "bad decision: not JSON" }]);
    const namesWho = await refusedBody(JSON.stringify({ ...JSON.parse(decision), by: "mallory" }));
    assert.equal(namesWho.status, 400, "who decides is the logged-in operator, never the body");
    assert.match(JSON.parse(namesWho.body).error, /^bad decision: .*by/);
    const huge = await refusedBody(JSON.stringify({ ...JSON.parse(decision), reason: "x".repeat(20_000) }));
    assert.equal(huge.status, 400, "a body over 16 KiB");
    assert.equal((await call(dash.url, { headers: { Host: "evil.example" } })).status, 421, "DNS rebinding");
  } finally {
    await dash.close();
    await testRig.dispose();
  }
});

test("off loopback: no start without a token; a token is asked for once in a POST, kept as an HttpOnly cookie, and names its operator", async () => {
  // The token file: one token per line, or `name token`; a bare token is the dashboard operator's.
  assert.deepEqual(
    [...parseTokens("# operators\nerin abcdefghijklmnop1\n\nqrstuvwxyzabcdef12  # mine\n", "dana")],
    [
      ["erin", "abcdefghijklmnop1"],
      ["dana", "qrstuvwxyzabcdef12"],
    ],
  );
  assert.throws(() => parseTokens("erin short\n", "dana"), /shorter than 16/);
  const testRig = await rig({ responses: [] });
  await assert.rejects(
    startDashboard({ redis: testRig.redis, prefix: testRig.space.logPrefix, host: "0.0.0.0" }),
    /TURNSTREAM_DASHBOARD_TOKEN_FILE/,
  );
  const token = "dashboard-token-7c1f9e2b5a";
  const dash = await startDashboard({
    redis: testRig.redis,
    prefix: testRig.space.logPrefix,
    queuePrefix: testRig.space.queuePrefix,
    host: "0.0.0.0",
    operatorTokens: { erin: token, frank: "frank-token-0a8e3c6d9b" },
  });
  const base = `http://127.0.0.1:${dash.port}/`;
  try {
    const first = await call(base);
    assert.equal(first.status, 303);
    assert.equal(first.headers.location, "/login");
    assert.equal((await call(`${base}api/fleet`)).status, 401);
    const form = { "Content-Type": "application/x-www-form-urlencoded" };
    const wrong = await call(`${base}login`, { method: "POST", headers: form, body: "token=guess" });
    assert.equal(wrong.status, 303);
    assert.equal(wrong.headers["set-cookie"], undefined);
    const right = await call(`${base}login`, { method: "POST", headers: form, body: `token=${token}` });
    assert.equal(right.status, 303);
    assert.ok(!String(right.headers.location).includes(token), "the token is not put in a URL");
    const cookie = String(right.headers["set-cookie"]).split(";")[0]!;
    assert.match(String(right.headers["set-cookie"]), /HttpOnly; SameSite=Strict/);
    assert.ok(!cookie.includes(token), "the cookie is not the token");
    const page = await call(base, { headers: { Cookie: cookie } });
    assert.equal(page.status, 200);
    assert.ok(!page.body.includes(token));
    assert.equal(
      (
        await call(`${base}api/decide`, {
          method: "POST",
          headers: { "Content-Type": "application/json", Cookie: cookie },
          body: decision,
        })
      ).status,
      403,
      "the cookie alone cannot decide",
    );
    // The login names its operator: the console says who decides, and decisions carry that name.
    const ac = new AbortController();
    const hello = await fetch(`${base}api/fleet`, { headers: { Cookie: cookie }, signal: ac.signal });
    const said = new TextDecoder().decode((await hello.body!.getReader().read()).value);
    ac.abort();
    assert.match(said, /^event: hello\ndata: \{"operator":"erin"/);
  } finally {
    await dash.close();
    await testRig.dispose();
  }
});

test("a token on loopback: the console asks for the login there too, and a decision without it is refused", async () => {
  const testRig = await rig({ responses: [] });
  const dash = await startDashboard({
    redis: testRig.redis,
    prefix: testRig.space.logPrefix,
    queuePrefix: testRig.space.queuePrefix,
    operatorKey,
    operatorTokens: { dana: "loopback-token-5e0d7a91c3" },
  });
  try {
    const first = await call(dash.url);
    assert.equal(first.status, 303);
    assert.equal(first.headers.location, "/login");
    const refused = await call(`${dash.url}api/decide`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Origin: dash.url.slice(0, -1), "Sec-Fetch-Site": "same-origin" },
      body: decision,
    });
    assert.equal(refused.status, 401, "log in first");
  } finally {
    await dash.close();
    await testRig.dispose();
  }
});
