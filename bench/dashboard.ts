// Dashboard: (1) a session of 10,000 events (assistant text, tool calls and their results) shows its
// transcript in headless Chromium within 1 s of navigation — from page.goto of a fresh page to the
// first frame painted with its last item in the DOM (on a dashboard that has served a page before;
// the first page after start is reported too); (2) a line appended to the log reaches the open page's DOM with p99 ≤
// 100 ms — each append
// waits for the previous one to be seen (a MutationObserver in the page reports it back).
// Options: --events N (default 10000), --appends N (default 500), --url redis://… (default: a
// private redis-server).
import { parseArgs } from "node:util";
import { createEventLog, type EventInput } from "../src/log/index.ts";
import { startDashboard } from "../src/dashboard/index.ts";
import type { Page } from "playwright-core";
import { launchBrowser } from "../test/dashboard/_browser.ts";
import { benchRedis } from "./_redis.ts";
import { quantile } from "./_stats.ts";

const { values } = parseArgs({
  options: {
    events: { type: "string", default: "10000" },
    appends: { type: "string", default: "500" },
    url: { type: "string" },
  },
});
const total = Number(values.events);
const appends = Number(values.appends);

const store = await benchRedis(values.url);
const { redis } = store;
const prefix = `bench-dash-${process.pid}:`;
const session = "dash-bench";
const log = createEventLog({ redis, prefix });

const sid = "7a0d4baa-0424-4009-9309-c722202a1a4a";
const assistant = (id: string, content: unknown[]): string =>
  JSON.stringify({
    type: "assistant",
    message: { id, type: "message", role: "assistant", model: "claude-opus-5-5", content, stop_reason: null },
    parent_tool_use_id: null,
    session_id: sid,
  });
const toolResult = (id: string, text: string): string =>
  JSON.stringify({
    type: "user",
    message: { role: "user", content: [{ type: "tool_result", tool_use_id: id, content: text }] },
    parent_tool_use_id: null,
    session_id: sid,
  });

/** The i-th line of the session: text, a Bash call, its result (every tenth result long, to be folded). */
function lineOf(index: number): string {
  const kind = index % 3;
  const step = Math.floor(index / 3);
  if (kind === 0)
    return assistant(`msg_${step}`, [
      {
        type: "text",
        text: `Step ${step}: looking at the next file, then running the tests again to see what changed. `.repeat(2),
      },
    ]);
  if (kind === 1)
    return assistant(`msg_${step}t`, [
      {
        type: "tool_use",
        id: `toolu_${step}`,
        name: "Bash",
        input: { command: `grep -rn "pattern${step}" src/ | head -20`, description: "search" },
      },
    ]);
  return toolResult(
    `toolu_${step}`,
    step % 10 === 0
      ? `src/file${step}.ts:12: match\n`.repeat(200)
      : `src/file${step}.ts:12: const pattern${step} = true;\n`,
  );
}

async function buildSession(id: string, count: number): Promise<number> {
  await log.appendUnfenced(id, [
    { turn: "t1", attempt: 0, kind: "turn.queued", data: { prompt: "work through the repository", cwd: "/work" } },
  ]);
  const { epoch } = await log.beginAttempt(id, "t1");
  const events: EventInput[] = [
    { turn: "t1", attempt: 1, kind: "attempt.started", data: { worker: "bench", attempt: 1 } },
  ];
  for (let index = 0; events.length + 1 < count; index++)
    events.push({ turn: "t1", attempt: 1, kind: "cli.line", data: { raw: lineOf(index) } });
  for (let start = 0; start < events.length; start += 500)
    await log.append(id, epoch, events.slice(start, start + 500));
  return epoch;
}

// Page-side code as text (this file is type-checked without the DOM's types): once the transcript
// holds the session's last event, report the time after the next frame is painted.
const REPORT_SHOWN = `new MutationObserver((_, obs) => {
  const box = document.getElementById("transcript");
  const seq = box?.dataset.seq;
  if (seq === undefined || box.querySelector('[data-seq="' + seq + '"]') === null) return;
  obs.disconnect();
  requestAnimationFrame(() => setTimeout(() => window.__shown(Number(seq))));
}).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-seq"] });`;

/** Opens a session in a fresh page; resolves with the page and ms from navigation to its last event shown. */
async function openTimed(id: string, lastSeq: number): Promise<{ page: Page; ms: number }> {
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  let done: () => void = () => {};
  const shown = new Promise<void>((resolve) => (done = resolve));
  await page.exposeBinding("__shown", (_src, seq: number) => seq >= lastSeq && done());
  await page.addInitScript(REPORT_SHOWN);
  const t0 = performance.now();
  await page.goto(`${dash.url}#/session/${id}`);
  await shown;
  return { page, ms: performance.now() - t0 };
}

const r3 = (x: number): number => Number(x.toFixed(3));

const epoch = await buildSession(session, total);
// Opened first, so the measured page is not the first the dashboard serves (nor one it has folded).
const first = `${session}-first`;
await buildSession(first, total);
const lastSeq = (await log.stat(session)).lastSeq;
const dash = await startDashboard({ redis, prefix });
const browser = await launchBrowser();
try {
  // A dashboard runs for days: its first page after start also pays for compiling the server's code,
  // reported apart. The measured one is a fresh page load of another session of the same size, which
  // the dashboard has not folded yet.
  const cold = await openTimed(first, lastSeq);
  await cold.page.close();
  process.stdout.write(`first page after the dashboard started: ${cold.ms.toFixed(0)} ms (not held to the goal)\n`);
  const { page, ms: renderMs } = await openTimed(session, lastSeq);
  const seen = new Map<number, () => void>();
  await page.exposeBinding("__seen", (_src, seq: number) => {
    seen.get(seq)?.();
    seen.delete(seq);
  });
  const items = await page.locator("#transcript .item").count();
  const phases = await page.evaluate(`(() => {
    const at = (name) => Math.round(performance.getEntriesByName(name)[0]?.startTime ?? -1);
    const nav = performance.getEntriesByType("navigation")[0];
    return { domContentLoaded: Math.round(nav.domContentLoadedEventEnd), snapshotArrived: at("ts:snapshot"), parsed: at("ts:parsed"), rendered: at("ts:rendered"), painted: at("ts:painted"), now: Math.round(performance.now()) };
  })()`);
  process.stdout.write(`in the page (ms since navigation): ${JSON.stringify(phases)}\n`);
  process.stdout.write(
    `${lastSeq} events: transcript (${items} items) in the DOM ${renderMs.toFixed(0)} ms after navigation (goal ≤ 1000 ms)\n`,
  );

  await page.evaluate(`(() => {
    const box = document.getElementById("transcript");
    new MutationObserver(() => {
      const seq = Number(box.dataset.seq);
      if (box.querySelector('.item[data-seq="' + seq + '"]') !== null) window.__seen(seq);
    }).observe(box, { childList: true, subtree: true, attributes: true, attributeFilter: ["data-seq"] });
  })()`);
  const lat: number[] = [];
  for (let append = 0; append < appends; append++) {
    const seq = lastSeq + append + 1;
    const shown = new Promise<void>((resolve) => seen.set(seq, resolve));
    const sentAt = performance.now();
    await log.append(session, epoch, [
      {
        turn: "t1",
        attempt: 1,
        kind: "cli.line",
        data: { raw: assistant(`live_${append}`, [{ type: "text", text: `live line ${append}` }]) },
      },
    ]);
    await shown;
    lat.push(performance.now() - sentAt);
  }
  lat.sort((a, b) => a - b);
  process.stdout.write(
    `append → page DOM, ${lat.length} appends: p50 ${quantile(lat, 0.5).toFixed(2)} ms, p99 ${quantile(lat, 0.99).toFixed(2)} ms, max ${lat.at(-1)!.toFixed(2)} ms (goal p99 ≤ 100 ms)\n`,
  );
  const ratio = Math.min(1000 / renderMs, 100 / quantile(lat, 0.99));
  process.stdout.write(
    JSON.stringify({
      bench: "dashboard",
      events: lastSeq,
      items,
      renderMs: r3(renderMs),
      coldRenderMs: r3(cold.ms),
      goalRenderMs: 1000,
      appends: lat.length,
      p50Ms: r3(quantile(lat, 0.5)),
      p99Ms: r3(quantile(lat, 0.99)),
      maxMs: r3(lat.at(-1)!),
      goalP99Ms: 100,
      ratio: r3(ratio),
    }) + "\n",
  );
} finally {
  await browser.close();
  await dash.close();
  await log.destroy(session);
  await log.destroy(first);
  await store.close();
}
