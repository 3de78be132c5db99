// A finished session in a real browser: its transcript and trace link, stepping back in time (keys and the address
// bar, folded like `replay --until`), and back to live. A canary secret in a tool's output and input,
// in assistant text, in an error message and in a secret-named environment value of the dashboard's
// process appears nowhere: not in the page, not in what the server sends.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { Envelope } from "../../src/log/index.ts";
import { rig } from "../worker/_more.ts";
import { consoleFor, firstEvents, screenshot } from "./_browser.ts";

const GH_CANARY = `ghp_${randomBytes(18).toString("hex")}`;
const ENV_CANARY = `envcanary${randomBytes(12).toString("hex")}`;
const TRACE_ID = randomBytes(16).toString("hex");

const line = (message: unknown, type = "assistant", parent: string | null = null) =>
  JSON.stringify({ type, message, parent_tool_use_id: parent, session_id: "5c3c1c1e-0000-4000-8000-000000000001" });

/** A turn planted straight into the log, as an import of an older log could hold it: nothing scrubbed. */
async function plantRawTurn(testRig: Awaited<ReturnType<typeof rig>>, session: string): Promise<void> {
  const turn = "t_planted";
  await testRig.producer.log.appendUnfenced(session, [
    { turn, attempt: 0, kind: "turn.queued", data: { prompt: `use ${ENV_CANARY}`, cwd: testRig.ws } },
  ]);
  // Attempt 1 is abandoned (its worker lost the lease) after one line; attempt 2 does the work.
  const first = await testRig.producer.log.beginAttempt(session, turn);
  await testRig.producer.log.append(session, first.epoch, [
    { turn, attempt: first.attempt, kind: "attempt.started", data: { worker: "planted", attempt: first.attempt } },
    {
      turn,
      attempt: first.attempt,
      kind: "cli.line",
      data: {
        raw: line({ id: "m0", role: "assistant", model: "m", content: [{ type: "text", text: "starting over" }] }),
      },
    },
    {
      turn,
      attempt: first.attempt,
      kind: "attempt.abandoned",
      data: { reason: "lease_lost", attempt: first.attempt, retry: true },
    },
  ]);
  const { epoch, attempt } = await testRig.producer.log.beginAttempt(session, turn);
  const long = `${"x".repeat(3000)}\nthe key is ${GH_CANARY}\n`;
  const lines = [
    line({ id: "m1", role: "assistant", model: "m", content: [{ type: "text", text: `I found ${GH_CANARY}` }] }),
    line({
      id: "m2",
      role: "assistant",
      model: "m",
      content: [
        {
          type: "tool_use",
          id: "toolu_p1",
          name: "Bash",
          input: { command: `curl -H 'X: ${ENV_CANARY}' https://example.com` },
        },
      ],
    }),
    line({ role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_p1", content: long }] }, "user"),
    // A subagent: its work carries the id of the Task call that started it.
    line({
      id: "m3",
      role: "assistant",
      model: "m",
      content: [
        {
          type: "tool_use",
          id: "toolu_task",
          name: "Task",
          input: { description: "look around", prompt: "list the files" },
        },
      ],
    }),
    line(
      { id: "m4", role: "assistant", model: "m", content: [{ type: "text", text: "subagent: three files here" }] },
      "assistant",
      "toolu_task",
    ),
    line(
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_task", content: "three files" }] },
      "user",
    ),
  ];
  await testRig.producer.log.append(session, epoch, [
    {
      turn,
      attempt,
      kind: "attempt.started",
      data: { worker: "planted", attempt, trace: { traceId: TRACE_ID, spanId: "00f067aa0ba902b7" } },
    },
    ...lines.map((raw) => ({ turn, attempt, kind: "cli.line", data: { raw } })),
    {
      turn,
      attempt,
      kind: "turn.failed",
      data: {
        attempt,
        errorKind: "cli_error",
        error: { name: "Error", message: `boom ${GH_CANARY} ${ENV_CANARY}` },
        retryable: false,
      },
    },
  ]);
}

const seqOf = (events: Envelope[], pred: (event: Envelope) => boolean): number => {
  const found = events.find(pred);
  assert.ok(found !== undefined);
  return found.seq;
};

test("a finished session: transcript, steps back in time and back to live; a canary secret appears nowhere", async () => {
  const testRig = await rig({
    responses: [
      {
        content: [{ type: "tool_use", name: "Bash", input: { command: `echo ${GH_CANARY}`, description: "print it" } }],
      },
      { content: [{ type: "text", text: "printed the value" }] },
    ],
  });
  testRig.worker();
  process.env["DASHBOARD_CANARY_TOKEN"] = ENV_CANARY;
  const ui = await consoleFor(testRig, { traceUrl: "https://traces.example/t/{traceId}?x=1" });
  const { dash, page, errors } = ui;
  try {
    const queued = await testRig.producer.enqueueTurn({
      prompt: "print the value",
      cwd: testRig.ws,
      options: { allowedTools: ["Bash"] },
    });
    assert.equal((await testRig.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 })).status, "finished");
    await plantRawTurn(testRig, queued.session);
    const events = await testRig.events(queued.session);
    const last = events.at(-1)!.seq;
    const finished = seqOf(events, (e) => e.kind === "turn.finished");
    const callSeq = seqOf(
      events,
      (e) => e.kind === "cli.line" && /"tool_use"/.test(String((e.data as { raw?: string }).raw)),
    );
    const resultSeq = seqOf(
      events,
      (e) => e.kind === "cli.line" && /"tool_result"/.test(String((e.data as { raw?: string }).raw)),
    );
    const plantedResult = seqOf(
      events,
      (event) =>
        event.turn === "t_planted" &&
        event.kind === "cli.line" &&
        /"tool_result"/.test(String((event.data as { raw?: string }).raw)),
    );

    await page.goto(`${dash.url}#/session/${queued.session}`);
    const real = page.locator(`section.turn[data-turn="${queued.turn}"]`);
    const planted = page.locator('section.turn[data-turn="t_planted"]');
    await real.locator(".turn-head .badge", { hasText: "finished" }).waitFor({ timeout: 20_000 });
    await planted.locator(".turn-head .badge", { hasText: "failed" }).waitFor();
    assert.match(await page.locator("#where").innerText(), new RegExp(`live · event ${last}$`));
    assert.match(String(await real.textContent()), /printed the value/);
    assert.match(await planted.locator(".turn-head").innerText(), /cli_error: boom \[REDACTED/);
    assert.match(String(await planted.locator("details.folded summary").textContent()), /result · 3\.\d KB \(folded\)/);
    assert.equal(
      await planted.locator("a.trace").getAttribute("href"),
      `https://traces.example/t/${TRACE_ID}?x=1`,
      "the turn links to its trace",
    );
    assert.match(
      await planted.locator("details.abandoned > summary").innerText(),
      /abandoned attempt 1: lease_lost \(1 item\)/,
    );
    assert.match(await planted.locator(".turn-head").innerText(), /2 attempts/);
    const task = planted.locator('.tool[data-tool="Task"]');
    assert.match(
      String(await task.locator(".subagent").textContent()),
      /subagent · 1 item[\s\S]*subagent: three files here/,
      "subagent work nested under its call",
    );
    assert.match(String(await task.locator(":scope > .result").textContent()), /three files/);
    await screenshot(page, "session-live");

    // Back, one event per key press, to just before the real turn finished.
    for (let step = 0; step < last - finished + 1; step++) await page.keyboard.press("ArrowLeft");
    await page
      .locator("#where")
      .getByText(`event ${finished - 1} of ${last}`)
      .waitFor();
    await real.locator(".turn-head .badge", { hasText: "running" }).waitFor();
    assert.equal(await planted.count(), 0, "the later turn is not there yet");
    await page.keyboard.press("Home");
    await page.locator("#where").getByText(`event 1 of ${last}`).waitFor();
    await real.locator(".turn-head .badge", { hasText: "queued" }).waitFor();
    assert.equal(await real.locator(".item").count(), 0);

    // The address names the moment: the call is there, its result not yet; one step on, it is.
    await page.goto(`${dash.url}#/session/${queued.session}/at/${callSeq}`);
    await page.locator("#where").getByText(`event ${callSeq} of ${last}`).waitFor();
    await real.locator('.tool[data-tool="Bash"]', { hasText: "no result yet" }).waitFor();
    await screenshot(page, "session-past");
    for (let step = 0; step < resultSeq - callSeq; step++) await page.keyboard.press("ArrowRight");
    await page.locator("#where").getByText(`event ${resultSeq} of ${last}`).waitFor();
    await real.locator('.tool[data-tool="Bash"] .result', { hasText: "[REDACTED:github_token]" }).waitFor();
    await page.keyboard.press("l");
    await page.locator("#where").getByText(`live · event ${last}`).waitFor();
    await planted.waitFor();

    // Nothing anywhere holds a canary: open every fold, then read the whole page and the server's answers.
    const closed = page.locator("details:not([open]) > summary");
    while ((await closed.count()) > 0) await closed.first().click();
    // The page holds a long result's start; opening it fetches the rest.
    await planted.locator("details.folded pre", { hasText: "the key is [REDACTED:github_token]" }).waitFor();
    const shown = (await page.content()) + (await page.locator("body").innerText());
    const served = [
      await (await fetch(`${dash.url}api/sessions/${queued.session}?until=${last}`)).text(),
      await firstEvents(`${dash.url}api/sessions/${queued.session}/stream`, 1),
      await firstEvents(`${dash.url}api/fleet`, 4),
      await (await fetch(`${dash.url}api/sessions/${queued.session}/result?seq=${plantedResult}`)).text(),
      await (await fetch(`${dash.url}api/sessions/${queued.session}/timeline`)).text(),
      await (await fetch(`${dash.url}api/search?q=${encodeURIComponent("the key is")}`)).text(),
    ].join("\n");
    assert.match(served, /REDACTED/);
    for (const canary of [GH_CANARY, ENV_CANARY]) {
      assert.ok(!shown.includes(canary), `page shows ${canary}`);
      assert.ok(!served.includes(canary), `server sends ${canary}`);
    }
    assert.deepEqual(errors, []);
  } finally {
    delete process.env["DASHBOARD_CANARY_TOKEN"];
    await ui.close();
    await testRig.dispose();
  }
});
