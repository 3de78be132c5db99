// The model cooldowns in the console's queue view, in a real browser, live: a turn's first model call
// is answered 429 (retry-after 3 s), so the worker's gateway cools its credential for the fleet; the
// open queue view shows the credential's fingerprint and the status without a reload, and "none"
// again once the CLI's retry went as the probe and succeeded.
import { test } from "node:test";
import assert from "node:assert/strict";
import { credentialFrom } from "../../src/gateway/index.ts";
import { rig } from "../worker/_more.ts";
import { consoleFor, screenshot } from "./_browser.ts";

const KEY = "sk-ant-test-dummy-key-0000";

test("a cooldown appears live in the queue view with its credential's fingerprint, and goes once a probe succeeds", async () => {
  const testRig = await rig({
    responses: [
      { error: { status: 429, type: "rate_limit_error", message: "slow down", headers: { "retry-after": "3" } } },
      { content: [{ type: "text", text: "after the cooldown" }] },
    ],
  });
  // The CLI may retry: its retry, after the 3 s it was asked to wait, is the probe.
  testRig.worker({ runEnv: { CLAUDE_CODE_MAX_RETRIES: "2" } });
  const ui = await consoleFor(testRig);
  const { dash, page, errors } = ui;
  try {
    await page.goto(`${dash.url}#/queue`);
    await page.getByText("model cooldowns: none").waitFor({ timeout: 20_000 });

    const queued = await testRig.producer.enqueueTurn({ prompt: "hello", cwd: testRig.ws });
    const fingerprint = credentialFrom({ ANTHROPIC_API_KEY: KEY }, undefined)!.fingerprint();
    const row = page.locator("table#cooldowns tbody tr");
    await row.waitFor({ timeout: 30_000 });
    const cells = await row.locator("td").allInnerTexts();
    assert.equal(cells[0], fingerprint);
    assert.equal(cells[1], "429");
    assert.match(cells[3]!, /^\ds left$|^ended/);
    await screenshot(page, "cooldown");
    assert.equal((await page.content()).includes(KEY), false, "the page shows the fingerprint, never the key");

    const res = await testRig.producer.waitForTurn(queued.turn, { timeoutMs: 90_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    await page.getByText("model cooldowns: none").waitFor({ timeout: 20_000 });
    assert.deepEqual(errors, []);
  } finally {
    await ui.close();
    await testRig.dispose();
  }
});
