// Search in transcripts and the sessions list's filters in a real browser. A search finds text in
// several sessions and opens the matching turn; markup in a match is shown as text; a secret's own
// characters find nothing (the search reads what the page would show, scrubbed), while the text
// around it finds the match with the secret redacted. The list filters by status, label, cwd and date,
// and the address keeps them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { Page } from "playwright-core";
import { rig } from "../worker/_more.ts";
import { consoleFor, screenshot } from "./_browser.ts";
import { plantTurn } from "./_plant.ts";

const SECRET_HEX = randomBytes(18).toString("hex");
const GH_CANARY = `ghp_${SECRET_HEX}`;
const DAY = 86_400_000;

async function search(
  page: Page,
  query: string,
): Promise<Array<{ session: string; turn: string; where: string; snippet: string; href: string }>> {
  const input = page.locator('input[aria-label="search in transcripts"]');
  await input.fill(query);
  await input.press("Enter");
  await page.locator("#search-note", { hasText: /match|characters/ }).waitFor({ timeout: 20_000 });
  return page.locator("#search-results li").evaluateAll((items) =>
    items.map((li) => ({
      session: li.getAttribute("data-session")!,
      turn: li.getAttribute("data-turn")!,
      where: li.getAttribute("data-where")!,
      snippet: li.querySelector(".snippet")!.textContent!,
      href: li.querySelector("a")!.getAttribute("href")!,
    })),
  );
}

test("search in transcripts opens the matching turn, never matches a secret; the sessions list filters by status, label, cwd and date", async () => {
  const testRig = await rig({ responses: [] });
  const log = testRig.producer.log;
  const now = Date.now();
  const turn = (startMs: number) => ({ queuedMs: startMs, startedMs: startMs + 100, endedMs: startMs + 2000 });
  await plantTurn(log, "s-alpha", {
    turn: "t_alpha",
    ...turn(now - 60_000),
    outcome: "finished",
    tenant: "acme",
    labels: { team: "core" },
    cwd: "/srv/a",
    text: "the quick brown fox jumps",
  });
  await plantTurn(log, "s-beta", {
    turn: "t_beta",
    ...turn(now - 3 * DAY),
    outcome: "failed",
    tenant: "globex",
    labels: { team: "web" },
    cwd: "/srv/b",
    text: "a lazy dog near <script>window.pwned=1</script>",
  });
  await plantTurn(log, "s-gamma", {
    turn: "t_gamma0",
    ...turn(now - 3 * DAY - 60_000),
    outcome: "finished",
    cwd: "/srv/a/sub",
    text: "nothing here",
  });
  await plantTurn(log, "s-gamma", {
    turn: "t_gamma",
    ...turn(now - 3 * DAY),
    outcome: "finished",
    cwd: "/srv/a/sub",
    text: `a brown bear holds the key ${GH_CANARY} today`,
  });

  const ui = await consoleFor(testRig);
  const { dash, page, errors } = ui;
  try {
    await page.goto(`${dash.url}#/search`);

    const brown = await search(page, "Brown");
    assert.deepEqual(brown.map((hit) => `${hit.session} ${hit.turn} ${hit.where}`).sort(), [
      "s-alpha t_alpha text",
      "s-gamma t_gamma text",
    ]);
    const bear = brown.find((hit) => hit.session === "s-gamma")!;
    assert.match(bear.snippet, /a brown bear holds the key \[REDACTED:github_token\] today/);
    assert.match(await page.locator("#search-note").innerText(), /2 matches in 3 of 3 sessions/);
    assert.equal(new URLSearchParams(page.url().split("?")[1]).get("q"), "Brown", "the address keeps the query");
    await screenshot(page, "search");

    // The secret's own characters find nothing: the search cannot be used to guess it.
    assert.deepEqual(await search(page, SECRET_HEX.slice(0, 12)), []);
    assert.deepEqual(await search(page, "ghp_"), []);
    const markup = await search(page, "<script>");
    assert.deepEqual(
      markup.map((hit) => hit.session),
      ["s-beta"],
    );
    assert.equal(await page.locator("#search-results script").count(), 0, "a match's markup is text");
    assert.equal(await page.evaluate('"pwned" in window'), false);
    await search(page, "x");
    assert.match(await page.locator("#search-note").innerText(), /2 to 200 characters/);

    // A result opens its session at its turn.
    await search(page, "brown bear");
    await page.locator('#search-results a[href="#/session/s-gamma/turn/t_gamma"]').click();
    await page.locator('section.turn.focus[data-turn="t_gamma"]').waitFor({ timeout: 20_000 });
    assert.equal(await page.locator("section.turn.focus").count(), 1);
    const served = await (await fetch(`${dash.url}api/search?q=${encodeURIComponent("holds the key")}`)).text();
    assert.ok(served.includes("REDACTED") && !served.includes(GH_CANARY), "the server sends the match scrubbed");

    // The sessions list's filters, each kept in the address.
    const listed = async (): Promise<string[]> =>
      (
        await page
          .locator("#sessions tbody tr[data-session]")
          .evaluateAll((rows) => rows.map((r) => r.getAttribute("data-session")!))
      ).sort();
    await page.goto(`${dash.url}#/sessions`);
    await page.locator('#sessions tr[data-session="s-gamma"]').waitFor({ timeout: 20_000 });
    assert.deepEqual(await listed(), ["s-alpha", "s-beta", "s-gamma"]);
    assert.equal(await page.locator('#sessions tr[data-session="s-beta"] td.cwd').innerText(), "/srv/b");
    await page.locator('input[name="label"]').fill("team=core");
    assert.deepEqual(await listed(), ["s-alpha"]);
    await page.locator('input[name="label"]').fill("team");
    assert.deepEqual(await listed(), ["s-alpha", "s-beta"], "a bare name: every session carrying the label");
    await page.locator('input[name="label"]').fill("");
    await page.locator('input[name="cwd"]').fill("/srv/a");
    assert.deepEqual(await listed(), ["s-alpha", "s-gamma"]);
    assert.equal(new URL(page.url()).searchParams.get("cwd"), "/srv/a");
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    await page.locator('input[name="from"]').fill(day(now - DAY));
    assert.deepEqual(await listed(), ["s-alpha"]);
    await page.locator('input[name="from"]').fill("");
    await page.locator('input[name="to"]').fill(day(now - 2 * DAY));
    assert.deepEqual(await listed(), ["s-gamma"]);
    await page.locator('input[name="cwd"]').fill("");
    await page.locator('select[name="status"]').selectOption("failed");
    assert.deepEqual(await listed(), ["s-beta"]);
    await screenshot(page, "sessions-filters");
    // The address alone brings the filters back.
    await page.goto(`${dash.url}?status=finished&label=team%3Dcore#/sessions`);
    await page.locator('#sessions tr[data-session="s-alpha"]').waitFor({ timeout: 20_000 });
    assert.deepEqual(await listed(), ["s-alpha"]);
    assert.equal(await page.locator('input[name="label"]').inputValue(), "team=core");
    assert.deepEqual(errors, []);
  } finally {
    await ui.close();
    await testRig.dispose();
  }
});
