// Fleet charts in a real browser, read back from the SVG: turns planted with known times, outcomes,
// costs, durations and tool calls, then every bar and point checked against them (how many, which,
// and their sizes relative to each other), for the last 24 hours, the last 7 days, a from–to window
// and cost by a label. A tool whose name is markup is drawn as text.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import { rig } from "../worker/_more.ts";
import { consoleFor, screenshot } from "./_browser.ts";
import { plantTurn, type PlantedTurn } from "./_plant.ts";

const MIN = 60_000;
const HOUR = 60 * MIN;
const HOSTILE_TOOL = `<img src=x onerror="window.pwned=1">`;

/** A turn ending `agoMs` before now that ran for `durationMs`. */
function turnAt(
  now: number,
  agoMs: number,
  durationMs: number,
  rest: Omit<PlantedTurn, "queuedMs" | "startedMs" | "endedMs">,
): PlantedTurn {
  const endedMs = now - agoMs;
  const startedMs = endedMs - durationMs;
  const tools = (rest.tools ?? []).map((tool, index) => ({
    ...tool,
    atMs: startedMs + 10 + index * 2,
    endMs: startedMs + 11 + index * 2,
  }));
  return { ...rest, tools, queuedMs: startedMs - 5, startedMs, endedMs };
}

const tool = (name: string, isError: boolean) => ({ name, isError, atMs: 0, endMs: 0 });

/** What a chart's rows say: key → [value, bar width]. */
async function barsOf(page: Page, id: string): Promise<Map<string, [number, number]>> {
  const rows = await page
    .locator(`#${id} g.row`)
    .evaluateAll((gs) =>
      gs.map(
        (group) =>
          [
            group.getAttribute("data-key")!,
            Number(group.getAttribute("data-value")),
            Number(group.querySelector("rect")!.getAttribute("width")),
          ] as const,
      ),
    );
  return new Map(rows.map(([key, value, width]) => [key, [value, width]]));
}

/** Bars drawn in proportion: every width over its value is the same. */
function assertProportional(bars: Map<string, [number, number]>, what: string): void {
  const ratios = [...bars.values()].filter(([value]) => value > 0).map(([value, width]) => width / value);
  for (const ratio of ratios)
    assert.ok(Math.abs(ratio - ratios[0]!) < 0.01 * ratios[0]!, `${what}: bars in proportion (${ratios.join(", ")})`);
}

async function outcomeSegments(page: Page): Promise<Array<{ outcome: string; count: number; height: number }>> {
  return page.locator("#chart-outcomes rect.seg").evaluateAll((rects) =>
    rects.map((rect) => ({
      outcome: rect.getAttribute("data-outcome")!,
      count: Number(rect.getAttribute("data-count")),
      height: Number(rect.getAttribute("height")),
    })),
  );
}

const totalsOf = async (page: Page): Promise<string> => page.locator("#chart-totals").innerText();

/** Waits for the charts drawn after the page's `ask`th request. */
async function drawn(page: Page, ask: number): Promise<void> {
  await page.locator(`#charts[data-rendered="${ask}"]`).waitFor({ timeout: 20_000 });
}

test("fleet charts: outcomes, durations, cost by tenant and label, error kinds and tool failures, drawn from the data", async () => {
  const testRig = await rig({ responses: [] });
  const log = testRig.producer.log;
  const now = Date.now();
  const turns: Array<[string, PlantedTurn]> = [
    [
      "s-acme-1",
      turnAt(now, 20 * MIN, 10_000, {
        turn: "a1",
        outcome: "finished",
        tenant: "acme",
        labels: { team: "core" },
        costUsd: 0.3,
        tools: [tool("Bash", false), tool("Bash", false), tool("Read", true)],
      }),
    ],
    [
      "s-acme-1",
      turnAt(now, 2 * HOUR, 30_000, {
        turn: "a2",
        outcome: "failed",
        errorKind: "rate_limit",
        tenant: "acme",
        labels: { team: "core" },
        costUsd: 0.1,
        tools: [tool("Bash", true)],
      }),
    ],
    [
      "s-acme-2",
      turnAt(now, 5 * HOUR, 20_000, {
        turn: "a3",
        outcome: "finished",
        tenant: "acme",
        labels: { team: "web" },
        costUsd: 0.2,
      }),
    ],
    [
      "s-globex",
      turnAt(now, 50 * MIN, 4_000, {
        turn: "g1",
        outcome: "failed",
        errorKind: "cli_error",
        tenant: "globex",
        costUsd: 0.05,
        tools: [tool(HOSTILE_TOOL, false), tool(HOSTILE_TOOL, true)],
      }),
    ],
    ["s-globex", turnAt(now, 10 * HOUR, 2_000, { turn: "g2", outcome: "cancelled", tenant: "globex", costUsd: 0 })],
    ["s-none", turnAt(now, 30 * MIN, 60_000, { turn: "n1", outcome: "finished", costUsd: 0.15 })],
    [
      "s-old",
      turnAt(now, 72 * HOUR, 100_000, {
        turn: "o1",
        outcome: "finished",
        tenant: "acme",
        labels: { team: "core" },
        costUsd: 1,
      }),
    ],
  ];
  // Each session's turns in time order, as a log holds them.
  for (const [session, spec] of [...turns].sort((a, b) => a[1].queuedMs - b[1].queuedMs))
    await plantTurn(log, session, spec);

  const ui = await consoleFor(testRig);
  const { dash, page, errors } = ui;
  try {
    await page.goto(`${dash.url}#/charts?window=24h`);
    await drawn(page, 1);

    // The last 24 hours: six turns, three finished, two failed, one cancelled.
    assert.match(
      await totalsOf(page),
      /turns 6\s+finished 3\s+failed 2\s+cancelled 1\s+cost \$0\.8000\s+p50 10\.0 s\s+p95 1\.0 min\s+sessions 4/,
    );
    const segments = await outcomeSegments(page);
    const byOutcome = (outcome: string) =>
      segments.filter((s) => s.outcome === outcome).reduce((n, s) => n + s.count, 0);
    assert.deepEqual([byOutcome("finished"), byOutcome("failed"), byOutcome("cancelled")], [3, 2, 1]);
    const perTurn = segments.map((s) => s.height / s.count);
    for (const height of perTurn) assert.ok(Math.abs(height - perTurn[0]!) < 0.01, "each turn is as tall in every bar");
    // Half hours on the clock's boundaries: 48 of them, and one more when the window starts within one.
    assert.ok([48, 49].includes(await page.locator("#chart-outcomes g.bucket").count()), "24 hours in half hours");

    // Durations: p95 never under p50, the longest p95 point is the 60 s turn's.
    const points = await page.locator("#chart-durations circle.pt").evaluateAll((cs) =>
      cs.map((circle) => ({
        series: circle.closest("g")!.getAttribute("data-series")!,
        ms: Number(circle.getAttribute("data-ms")),
        at: circle.getAttribute("data-at")!,
        cy: Number(circle.getAttribute("cy")),
      })),
    );
    const p95 = points.filter((p) => p.series === "p95Ms");
    assert.equal(Math.max(...p95.map((p) => p.ms)), 60_000);
    for (const point of points.filter((p) => p.series === "p50Ms")) {
      const high = p95.find((p) => p.at === point.at)!;
      assert.ok(high.ms >= point.ms && high.cy <= point.cy, "p95 at or above p50, drawn at or above it");
    }

    const cost = await barsOf(page, "chart-cost");
    assert.deepEqual([...cost.keys()], ["acme", "(no tenant)", "globex"], "costliest first");
    assert.deepEqual(
      [...cost.values()].map(([value]) => Number(value.toFixed(4))),
      [0.6, 0.15, 0.05],
    );
    assertProportional(cost, "cost");
    const kinds = await barsOf(page, "chart-errors");
    assert.deepEqual(Object.fromEntries([...kinds].map(([key, [value]]) => [key, value])), {
      rate_limit: 1,
      cli_error: 1,
    });
    const tools = await barsOf(page, "chart-tools");
    assert.deepEqual(Object.fromEntries([...tools].map(([key, [value]]) => [key, Number(value.toFixed(3))])), {
      Bash: 0.333,
      Read: 1,
      [HOSTILE_TOOL]: 0.5,
    });
    assertProportional(tools, "tool failure rates");
    assert.match((await page.locator("#chart-tools").textContent()) ?? "", /1\/3 failed \(33%\)/);
    assert.equal(await page.locator("#charts img").count(), 0, "a tool's markup is text");
    assert.equal(await page.evaluate('"pwned" in window'), false);
    await screenshot(page, "charts-24h");

    // The last 7 days take in the old turn.
    await page.locator('select[name="window"]').selectOption("7d");
    await drawn(page, 2);
    assert.match(await totalsOf(page), /turns 7\s+finished 4/);
    assert.equal((await barsOf(page, "chart-cost")).get("acme")![0].toFixed(2), "1.60");
    assert.equal(new URLSearchParams(page.url().split("?")[1]).get("window"), "7d", "the address keeps the window");

    // From 26 hours ago to an hour ago: the three turns that ended then.
    const local = (ms: number) =>
      page.evaluate(`new Date(${ms} - new Date(${ms}).getTimezoneOffset() * 60000).toISOString().slice(0, 16)`);
    await page.locator('select[name="window"]').selectOption("custom");
    await page.locator('input[name="from"]').fill(String(await local(now - 26 * HOUR)));
    await page.locator('input[name="to"]').fill(String(await local(now - HOUR)));
    await page.locator('input[name="to"]').dispatchEvent("change");
    await page.locator("#chart-totals", { hasText: "turns 3" }).waitFor();
    assert.match(await totalsOf(page), /turns 3\s+finished 1\s+failed 1\s+cancelled 1/);

    // Cost by a label: each value of `team`, and the turns without one.
    await page.locator('select[name="window"]').selectOption("24h");
    await page.locator('select[name="by"] option[value="label:team"]').waitFor({ state: "attached" });
    await page.locator('select[name="by"]').selectOption("label:team");
    await page.locator("#charts h2", { hasText: "Cost by team" }).waitFor();
    const byTeam = await barsOf(page, "chart-cost");
    assert.deepEqual(Object.fromEntries([...byTeam].map(([key, [value]]) => [key, Number(value.toFixed(4))])), {
      core: 0.4,
      web: 0.2,
      "(no label)": 0.2,
    });
    assertProportional(byTeam, "cost by team");
    await screenshot(page, "charts-by-label");

    // The page's tenant filter narrows the charts too.
    await page.goto(`${dash.url}?tenant=globex#/charts?window=24h`);
    await drawn(page, 1);
    assert.match(await totalsOf(page), /turns 2\s+finished 0\s+failed 1\s+cancelled 1/);

    const bad = await fetch(`${dash.url}api/charts?window=5y`);
    assert.equal(bad.status, 400);
    assert.deepEqual(errors, []);
  } finally {
    await ui.close();
    await testRig.dispose();
  }
});
