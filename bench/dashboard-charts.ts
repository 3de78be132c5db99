// Dashboard charts: the fleet charts over 10,000 sessions (their turns spread over the last 7 days,
// each with a read model, as a projector leaves them) shown in headless Chromium within 1 s — from
// page.goto of a fresh page to the first frame painted with the charts drawn. The measured page is on
// a dashboard that has computed the charts before, after 100 sessions moved on (a new turn each, not
// yet projected: folded from their logs); the first ask after start, which reads every read model,
// is reported apart, as is a 24-hour window (both asked of the API straight).
// Options: --sessions N (default 10000), --moved N (default 100), --url redis://… (default: a private
// redis-server).
import { parseArgs } from "node:util";
import { createEventLog } from "../src/log/index.ts";
import { startDashboard } from "../src/dashboard/index.ts";
import { commitProjection, foldAsync, PROJECTION_VERSION, projectionKeys } from "../src/projector/index.ts";
import { launchBrowser } from "../test/dashboard/_browser.ts";
import { plantTurn, type PlantedTurn } from "../test/dashboard/_plant.ts";
import { benchRedis } from "./_redis.ts";

const { values } = parseArgs({
  options: {
    sessions: { type: "string", default: "10000" },
    moved: { type: "string", default: "100" },
    url: { type: "string" },
  },
});
const total = Number(values.sessions);
const moved = Number(values.moved);

const store = await benchRedis(values.url);
const { redis } = store;
const prefix = `bench-charts-${process.pid}:`;
const log = createEventLog({ redis, prefix });
const HOUR = 3_600_000;
const now = Date.now();

/** A small deterministic generator, so every run charts the same fleet. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}
const rand = random(7);
const pick = <T>(items: readonly T[]): T => items[Math.floor(rand() * items.length)]!;
const TOOLS = ["Bash", "Read", "Edit", "Grep", "Write", "WebFetch"];
const OUTCOMES = ["finished", "finished", "finished", "finished", "failed", "cancelled"] as const;
const KINDS = ["rate_limit", "cli_error", "max_turns", "timeout"];

/** A turn ending `agoMs` ago, of a random tenant, team, outcome, cost and tool calls. */
function turnSpec(index: number, agoMs: number): PlantedTurn {
  const endedMs = now - agoMs;
  const startedMs = endedMs - 2000 - Math.floor(rand() * 120_000);
  const outcome = pick(OUTCOMES);
  return {
    turn: `t_${index}_${Math.floor(agoMs)}`,
    tenant: `tenant-${Math.floor(rand() * 20)}`,
    labels: { team: pick(["core", "web", "infra", "data", "ml"]) },
    queuedMs: startedMs - 500,
    startedMs,
    endedMs,
    outcome,
    errorKind: outcome === "failed" ? pick(KINDS) : undefined,
    costUsd: Number((rand() * 0.5).toFixed(4)),
    tools: Array.from({ length: 1 + Math.floor(rand() * 4) }, (_, call) => ({
      name: pick(TOOLS),
      isError: rand() < 0.1,
      atMs: startedMs + 100 + call * 10,
      endMs: startedMs + 105 + call * 10,
    })),
  };
}

/** One session of one or two turns, then its read model as the projector would commit it. */
async function buildSession(index: number): Promise<void> {
  const session = `charts-${index}`;
  const agoMs = rand() * 7 * 24 * HOUR;
  await plantTurn(log, session, turnSpec(index, agoMs + HOUR));
  if (rand() < 0.5) await plantTurn(log, session, turnSpec(index, agoMs));
  const state = await foldAsync(log.read(session));
  const keys = projectionKeys(prefix, session, PROJECTION_VERSION);
  await commitProjection(redis, keys, PROJECTION_VERSION, 0, null, state, undefined);
}

const built = performance.now();
for (let start = 0; start < total; start += 100)
  await Promise.all(Array.from({ length: Math.min(100, total - start) }, (_, k) => buildSession(start + k)));
process.stdout.write(`built ${total} sessions in ${((performance.now() - built) / 1000).toFixed(1)} s\n`);

// Page-side code as text (this file is type-checked without the DOM's types): once the charts are
// drawn, report the time after the next frame is painted.
const REPORT_DRAWN = `new MutationObserver((_, obs) => {
  const box = document.getElementById("charts");
  if (!box || !box.dataset.rendered) return;
  obs.disconnect();
  requestAnimationFrame(() => setTimeout(() => window.__drawn(performance.now(), document.querySelectorAll("#chart-outcomes rect.seg").length)));
}).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-rendered"] });`;

const dash = await startDashboard({ redis, prefix });
const browser = await launchBrowser();

/**
 * Opens the charts in a fresh page: ms from navigation to the charts painted, by the page's own clock
 * (once painted, the page starts its fleet stream, whose listing of every session runs in this same
 * process and would delay the report reaching it), and the server's own time.
 */
async function openTimed(window: string): Promise<{ ms: number; serverMs: number; bars: number }> {
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  let done: (drawn: { ms: number; bars: number }) => void = () => {};
  const drawn = new Promise<{ ms: number; bars: number }>((resolve) => (done = resolve));
  await page.exposeBinding("__drawn", (_src, ms: number, bars: number) => done({ ms, bars }));
  await page.addInitScript(REPORT_DRAWN);
  await page.goto(`${dash.url}#/charts?window=${window}`);
  const { ms, bars } = await drawn;
  const text = await page.locator("#chart-totals").innerText();
  const phases = await page.evaluate(`(() => {
    const nav = performance.getEntriesByType("navigation")[0];
    const api = performance.getEntriesByType("resource").find((e) => e.name.includes("/api/charts"));
    return { domContentLoaded: Math.round(nav.domContentLoadedEventEnd), asked: Math.round(api?.startTime ?? -1), answered: Math.round(api?.responseEnd ?? -1), drawn: Math.round(performance.getEntriesByName("ts:charts")[0]?.startTime ?? -1) };
  })()`);
  process.stdout.write(`  in the page (ms since navigation): ${JSON.stringify(phases)}\n`);
  await page.close();
  // The page's fleet stream lists every session once the charts are drawn: let that finish before
  // anything else is measured.
  await new Promise((resolve) => setTimeout(resolve, Math.max(3000, total)));
  return { ms, serverMs: Number(/computed in (\d+) ms/.exec(text)?.[1] ?? NaN), bars };
}

const r1 = (x: number): number => Number(x.toFixed(1));

/** The charts asked of the API straight (no page, so no fleet stream listing every session). */
async function askApi(window: string): Promise<{ ms: number; serverMs: number }> {
  const t0 = performance.now();
  const answer = (await (await fetch(`${dash.url}api/charts?window=${window}`)).json()) as { tookMs: number };
  return { ms: performance.now() - t0, serverMs: answer.tookMs };
}

try {
  // The first ask after start reads every read model; asked of the API, so no page of the console
  // (whose fleet stream lists every session) is still busy when the measured page opens.
  const cold = await askApi("7d");
  process.stdout.write(
    `first charts after the dashboard started (every read model read): ${cold.ms.toFixed(0)} ms, server ${cold.serverMs} ms (not held to the goal)\n`,
  );
  // Sessions move on: a new turn each, not projected yet.
  for (let index = 0; index < moved; index++)
    await plantTurn(log, `charts-${index}`, turnSpec(total + index, 60_000 + index));
  const measured = await openTimed("7d");
  process.stdout.write(
    `${total} sessions, ${moved} moved since: 7-day charts painted ${measured.ms.toFixed(0)} ms after navigation, server ${measured.serverMs} ms, ${measured.bars} bar segments (goal ≤ 1000 ms)\n`,
  );
  const day = await askApi("24h");
  process.stdout.write(`24-hour charts straight from the API: ${day.ms.toFixed(0)} ms, server ${day.serverMs} ms\n`);
  process.stdout.write(
    JSON.stringify({
      bench: "dashboard-charts",
      sessions: total,
      moved,
      renderMs: r1(measured.ms),
      serverMs: measured.serverMs,
      coldMs: r1(cold.ms),
      coldServerMs: cold.serverMs,
      dayApiMs: r1(day.ms),
      goalRenderMs: 1000,
      ratio: Number((1000 / measured.ms).toFixed(3)),
    }) + "\n",
  );
} finally {
  await browser.close();
  await dash.close();
  const keys = await redis.keys(`${prefix}*`);
  for (let start = 0; start < keys.length; start += 1000) await redis.del(...keys.slice(start, start + 1000));
  await store.close();
}
