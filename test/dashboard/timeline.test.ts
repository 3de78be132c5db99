// A session's timeline in a real browser, read back from the SVG: a supervised turn planted with known
// times (an attempt with a model call and two tool calls, a decision asked, the turn parked, decided
// by an operator, resumed by a second attempt with another model call) drawn as one row per span, each
// placed and sized by its own times; a second turn picked from the list. A tool named with markup is
// drawn as text.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { EventInput } from "../../src/log/index.ts";
import { rig } from "../worker/_more.ts";
import { consoleFor, screenshot } from "./_browser.ts";
import { plantTurn } from "./_plant.ts";

const SESSION = "timeline-session";
const TURN = "t_supervised";
const HOSTILE_TOOL = "<b>Grep</b>";
const CLI_SESSION = "5c3c1c1e-0000-4000-8000-00000000beef";

const iso = (ms: number): string => new Date(ms).toISOString();
const cliLine = (message: unknown, type = "assistant") =>
  JSON.stringify({ type, message, parent_tool_use_id: null, session_id: CLI_SESSION });
const toolUse = (id: string, name: string) =>
  cliLine({ id: `m_${id}`, role: "assistant", model: "m", content: [{ type: "tool_use", id, name, input: {} }] });
const toolResult = (id: string, isError: boolean) =>
  cliLine(
    { role: "user", content: [{ type: "tool_result", tool_use_id: id, content: "out", is_error: isError }] },
    "user",
  );

test("a session's timeline: attempts, model calls, tool calls, a decision wait and a parked stretch, each where and as long as it was", async () => {
  const testRig = await rig({ responses: [] });
  const log = testRig.producer.log;
  const t0 = Date.now() - 600_000;
  const at = (offsetMs: number): string => iso(t0 + offsetMs);
  const ev = (attempt: number, offsetMs: number, kind: string, data: unknown): EventInput => ({
    turn: TURN,
    attempt,
    at: at(offsetMs),
    kind,
    data,
  });
  await log.appendUnfenced(SESSION, [
    { turn: TURN, attempt: 0, at: at(0), kind: "turn.queued", data: { prompt: "look around", cwd: "/work" } },
  ]);
  const first = await log.beginAttempt(SESSION, TURN);
  const requestSeq = (await log.stat(SESSION)).lastSeq + 8;
  await log.append(SESSION, first.epoch, [
    ev(1, 1000, "attempt.started", { worker: "worker-a", attempt: 1, cwd: "/work" }),
    ev(1, 2000, "model.call", {
      startedAt: at(2000),
      method: "POST",
      path: "/v1/messages",
      model: "claude-test",
      stream: true,
      status: 200,
      ttfbMs: 500,
      durationMs: 3000,
    }),
    ev(1, 6000, "cli.line", { raw: toolUse("toolu_1", "Bash") }),
    ev(1, 8000, "cli.line", { raw: toolResult("toolu_1", false) }),
    ev(1, 9000, "cli.line", { raw: toolUse("toolu_2", HOSTILE_TOOL) }),
    ev(1, 9500, "cli.line", { raw: toolResult("toolu_2", true) }),
    ev(1, 9800, "cli.line", { raw: toolUse("toolu_3", "Bash") }),
    ev(1, 10_000, "decision.requested", {
      requestId: "req-1",
      nonce: "n1",
      tool: "Bash",
      toolUseId: "toolu_3",
      riskClass: "exec",
      input: "rm -rf build",
      hubId: "hub-1",
      timeoutMs: 60_000,
      expiresAt: at(70_000),
      parkable: true,
    }),
    ev(1, 11_000, "turn.parked", {
      attempt: 1,
      requestId: "req-1",
      requestSeq,
      tool: "Bash",
      toolUseId: "toolu_3",
      inputDigest: "d".repeat(64),
      cliSessionId: CLI_SESSION,
      deadline: at(70_000),
      parks: 1,
      queue: "turns",
    }),
  ]);
  await log.appendUnfenced(SESSION, [
    {
      turn: TURN,
      attempt: 1,
      at: at(20_000),
      kind: "decision.made",
      data: {
        requestId: "req-1",
        decision: "allow",
        by: "alice",
        source: "operator",
        reason: "ok",
        decidedAt: at(20_000),
      },
    },
  ]);
  const second = await log.beginAttempt(SESSION, TURN);
  await log.append(SESSION, second.epoch, [
    ev(second.attempt, 21_000, "attempt.started", {
      worker: "worker-b",
      attempt: second.attempt,
      cwd: "/work",
      resume: CLI_SESSION,
    }),
    ev(second.attempt, 22_000, "model.call", {
      startedAt: at(22_000),
      method: "POST",
      path: "/v1/messages",
      model: "claude-test",
      stream: true,
      status: 529,
      ttfbMs: 200,
      durationMs: 1000,
    }),
    ev(second.attempt, 25_000, "turn.finished", { attempt: second.attempt, costUsd: 0.01 }),
  ]);
  // A later turn: the timeline shows the latest turn first.
  await plantTurn(log, SESSION, {
    turn: "t_later",
    queuedMs: t0 + 30_000,
    startedMs: t0 + 31_000,
    endedMs: t0 + 40_000,
    outcome: "finished",
    tools: [{ name: "Read", isError: false, atMs: t0 + 32_000, endMs: t0 + 33_000 }],
  });

  const ui = await consoleFor(testRig);
  const { dash, page, errors } = ui;
  try {
    await page.goto(`${dash.url}#/session/${SESSION}`);
    await page.locator('svg.waterfall[data-turn="t_later"]').waitFor({ timeout: 20_000 });
    assert.deepEqual(
      await page
        .locator("svg.waterfall g.span")
        .evaluateAll((gs) => gs.map((group) => group.getAttribute("data-lane"))),
      ["attempt", "tool"],
      "the latest turn first",
    );
    await page.locator('select[aria-label="turn shown in the timeline"]').selectOption(TURN);
    await page.locator(`svg.waterfall[data-turn="${TURN}"]`).waitFor();

    const spans = await page.locator("svg.waterfall g.span").evaluateAll((gs) =>
      gs.map((group) => {
        const rect = group.querySelector("rect.bar")!;
        const ttfb = group.querySelector("line.ttfb");
        return {
          lane: group.getAttribute("data-lane")!,
          status: group.getAttribute("data-status")!,
          start: Number(group.getAttribute("data-start")),
          end: Number(group.getAttribute("data-end")),
          x: Number(rect.getAttribute("x")),
          width: Number(rect.getAttribute("width")),
          ttfbX: ttfb === null ? null : Number(ttfb.getAttribute("x1")),
          label: group.querySelector("text.label")!.textContent,
        };
      }),
    );
    // Times from the turn's queueing. The call the turn parked on never got its result in that run: it
    // ends with its attempt.
    const rel = (span: (typeof spans)[number]) => [
      span.lane,
      span.status,
      span.start - t0,
      span.end === 0 ? null : span.end - t0,
    ];
    assert.deepEqual(spans.map(rel), [
      ["attempt", "parked", 1000, 11_000],
      ["model", "ok", 2000, 5000],
      ["tool", "ok", 6000, 8000],
      ["tool", "error", 9000, 9500],
      ["tool", "unanswered", 9800, 11_000],
      ["decision", "allow", 10_000, 20_000],
      ["parked", "resumed", 11_000, 21_000],
      ["attempt", "finished", 21_000, 25_000],
      ["model", "error", 22_000, 23_000],
    ]);
    // Every bar as long as its span, on one scale, and placed by its start.
    const ended = spans.filter((span) => span.end > 0);
    const scale = ended[0]!.width / (ended[0]!.end - ended[0]!.start);
    for (const span of ended)
      assert.ok(
        Math.abs(span.width - scale * (span.end - span.start)) < 0.05,
        `${span.lane} ${span.label} sized by its time`,
      );
    for (const span of spans)
      assert.ok(Math.abs(span.x - (spans[0]!.x + scale * (span.start - spans[0]!.start))) < 0.05);
    // The model call's first byte is marked where it came.
    const model = spans.find((span) => span.lane === "model")!;
    assert.ok(Math.abs(model.ttfbX! - (model.x + scale * 500)) < 0.05);
    assert.deepEqual(
      spans.map((span) => span.label),
      [
        "attempt 1 · worker-a",
        "claude-test /v1/messages",
        "Bash",
        HOSTILE_TOOL,
        "Bash",
        "decision · Bash",
        "parked · Bash",
        "attempt 2 · worker-b",
        "claude-test /v1/messages",
      ],
    );
    assert.equal(await page.locator("svg.waterfall b").count(), 0, "a tool's markup is text");
    assert.match(
      (await page.locator("svg.waterfall g.span[data-lane=decision] title").textContent()) ?? "",
      /decision · Bash: 10\.0 s · allow by alice \(operator\)/,
    );
    await screenshot(page, "session-timeline");

    // The server sends names and times, never the request's input.
    const served = await (await fetch(`${dash.url}api/sessions/${SESSION}/timeline`)).text();
    assert.ok(!served.includes("rm -rf build"));
    assert.equal((await fetch(`${dash.url}api/sessions/no-such-session/timeline`)).status, 404);
    assert.deepEqual(errors, []);
  } finally {
    await ui.close();
    await testRig.dispose();
  }
});
