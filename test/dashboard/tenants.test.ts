// Tenants in a real browser: the sessions list shows each session's tenant and filters by it (a
// control, and `?tenant=` in the address, kept when the filter changes), and a session page shows its
// tenant and labels. A log planted with a tenant that is markup, a terminal escape or a bidi override
// shows no tenant at all, and nothing of it reaches the page or what the server sends.
import { test } from "node:test";
import assert from "node:assert/strict";
import { rig } from "../worker/_more.ts";
import { consoleFor, firstEvents, screenshot } from "./_browser.ts";

const ESC = "\u001b";
const HOSTILE = `<img src=x onerror="window.pwned=1">${ESC}[2J\u202e`;
/** Control (but line feed), bidi and invisible characters. */
const UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]/;

test("the sessions list shows and filters by tenant (control and ?tenant=); a session shows its tenant and labels; a hostile tenant shows nowhere", async () => {
  const done = (text: string) => ({ content: [{ type: "text", text }] });
  const testRig = await rig({ responses: [done("one"), done("two"), done("three")] });
  testRig.worker();
  const ui = await consoleFor(testRig);
  const { dash, page, errors } = ui;
  try {
    const acme = await testRig.producer.enqueueTurn({
      prompt: "one",
      cwd: testRig.ws,
      tenant: "acme/api",
      labels: { team: "core", note: "<b>bold</b>" },
    });
    const globex = await testRig.producer.enqueueTurn({ prompt: "two", cwd: testRig.ws, tenant: "globex" });
    const none = await testRig.producer.enqueueTurn({ prompt: "three", cwd: testRig.ws });
    for (const queued of [acme, globex, none])
      assert.equal((await testRig.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 })).status, "finished");
    // As an import of someone else's log could hold it: the tenant is whatever they wrote.
    const hostile = "planted-hostile";
    await testRig.producer.log.appendUnfenced(hostile, [
      { turn: "t_planted", attempt: 0, kind: "turn.queued", data: { prompt: "hi", cwd: testRig.ws, tenant: HOSTILE } },
    ]);

    page.on("dialog", (dialog) => {
      errors.push(`dialog: ${dialog.message()}`);
      void dialog.dismiss();
    });
    const rowOf = (session: string) => page.locator(`#sessions tr[data-session="${session}"]`);
    const listed = async (): Promise<string[]> =>
      (
        await page
          .locator("#sessions tbody tr[data-session]")
          .evaluateAll((rows) => rows.map((r) => r.dataset["session"]!))
      )
        .filter((session) => [acme, globex, none].some((q) => q.session === session) || session === hostile)
        .sort();

    // The address names the tenant: only its sessions, and the control says so.
    await page.goto(`${dash.url}?tenant=${encodeURIComponent("acme/api")}#/sessions`);
    await rowOf(acme.session).waitFor({ timeout: 20_000 });
    assert.deepEqual(await listed(), [acme.session]);
    const control = page.locator('select[aria-label="filter by tenant"]');
    assert.equal(await control.inputValue(), "acme/api");
    assert.equal((await rowOf(acme.session).locator("td.tenant").innerText()).trim(), "acme/api");
    await screenshot(page, "sessions-tenant");

    // The control changes the filter and the address with it.
    await control.selectOption("globex");
    await rowOf(globex.session).waitFor();
    assert.deepEqual(await listed(), [globex.session]);
    assert.equal(new URL(page.url()).searchParams.get("tenant"), "globex");
    await control.selectOption({ label: "no tenant" });
    await rowOf(none.session).waitFor();
    assert.deepEqual(await listed(), [none.session, hostile].sort());
    assert.equal(new URL(page.url()).searchParams.get("tenant"), "-");
    assert.equal((await rowOf(hostile).locator("td.tenant").innerText()).trim(), "–");
    await control.selectOption({ label: "all tenants" });
    await rowOf(acme.session).waitFor();
    assert.deepEqual(await listed(), [acme.session, globex.session, none.session, hostile].sort());
    assert.equal(new URL(page.url()).search, "");
    // The control offers the tenants listed, and nothing the hostile log wrote.
    const offered = await control.locator("option").allInnerTexts();
    assert.deepEqual(offered, ["all tenants", "no tenant", "acme/api", "globex"]);

    // A session page: its tenant and labels, a label's markup shown as text.
    await page.goto(`${dash.url}#/session/${acme.session}`);
    await page.locator(".figures .tenant b", { hasText: "acme/api" }).waitFor({ timeout: 20_000 });
    const labels = await page.locator(".figures .labels .label").allInnerTexts();
    assert.deepEqual(labels.sort(), ["note=<b>bold</b>", "team=core"]);
    assert.equal(await page.locator(".figures .labels b").count(), 0, "a label's markup is text, not an element");
    await screenshot(page, "session-tenant");

    // The hostile session's page: no tenant shown, no element or escape from it anywhere.
    await page.goto(`${dash.url}#/session/${hostile}`);
    await page.locator(".figures .tenant b", { hasText: "–" }).waitFor({ timeout: 20_000 });
    assert.equal(await page.locator("img").count(), 0);
    // Evaluated in the page, where `window` exists (as text: the tests' types have no DOM).
    assert.equal(await page.evaluate('"pwned" in window'), false);
    const shown = (await page.content()) + (await page.locator("body").innerText());
    assert.ok(!shown.includes("onerror"), "the page holds nothing of the hostile tenant");
    assert.doesNotMatch(await page.locator("body").innerText(), UNSAFE);
    const served = [
      await firstEvents(`${dash.url}api/fleet`, 4),
      await firstEvents(`${dash.url}api/sessions/${hostile}/stream`, 1),
      await (await fetch(`${dash.url}api/sessions/${hostile}?until=1`)).text(),
    ].join("\n");
    assert.match(served, new RegExp(`"tenant":"acme/api"`), "the fleet sends the tenants it has");
    assert.ok(!served.includes("onerror"), "the server sends nothing of the hostile tenant");
    assert.ok(!served.includes("\\u001b") && !served.includes(ESC), "nor its escape");
    assert.deepEqual(errors, []);
  } finally {
    await ui.close();
    await testRig.dispose();
  }
});
