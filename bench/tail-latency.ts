// Tail latency: time from starting an append (one cli.line event through the log's Lua append) to
// its line appearing on the stdout of a running `turnstream tail <session> --follow` process.
// Events are appended one at a time, each after the previous one was seen, so every figure is one
// independent append → visible trip. Prints p50/p99/max; goal p99 ≤ 10 ms.
// Options: --events N (default 1000), --url redis://… (default: a private redis-server).
import { parseArgs } from "node:util";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { createEventLog } from "../src/log/index.ts";
import { benchRedis } from "./_redis.ts";
import { quantile } from "./_stats.ts";

const { values } = parseArgs({ options: { events: { type: "string", default: "1000" }, url: { type: "string" } } });
const total = Number(values.events);
const root = join(import.meta.dirname, "..");

const store = await benchRedis(values.url);
const { redis, url } = store;
const prefix = `bench-tail-${process.pid}:`;
const session = "tail-bench";
const log = createEventLog({ redis, prefix });
const { epoch } = await log.beginAttempt(session, "t1");
const line = JSON.stringify({
  type: "assistant",
  message: {
    id: "msg_1",
    type: "message",
    role: "assistant",
    model: "claude-opus-5-5",
    content: [{ type: "text", text: "x".repeat(200) }],
    stop_reason: null,
  },
  parent_tool_use_id: null,
  session_id: "7a0d4baa-0424-4009-9309-c722202a1a4a",
});

const child = spawn(
  join(root, "node_modules", ".bin", "node"),
  [join(root, "src", "bin", "turnstream.ts"), "tail", session, "--follow", "--prefix", prefix],
  {
    cwd: root,
    env: { ...process.env, REDIS_URL: url, NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "inherit"],
  },
);
const seen = new Map<number, () => void>();
const rl = createInterface({ input: child.stdout! });
rl.on("line", (shownLine) => {
  const seq = Number(shownLine.trim().split(" ")[0]);
  seen.get(seq)?.();
  seen.delete(seq);
});
const visible = (seq: number): Promise<void> => new Promise((resolve) => seen.set(seq, resolve));

try {
  // The first event also tells us the tail is connected and following.
  const first = visible(1);
  await log.append(session, epoch, [{ turn: "t1", attempt: 1, kind: "attempt.started", data: {} }]);
  await first;
  const lat: number[] = [];
  for (let appendIndex = 0; appendIndex < total; appendIndex++) {
    const seq = appendIndex + 2;
    const shown = visible(seq);
    const t0 = performance.now();
    await log.append(session, epoch, [{ turn: "t1", attempt: 1, kind: "cli.line", data: { raw: line } }]);
    await shown;
    lat.push(performance.now() - t0);
  }
  lat.sort((a, b) => a - b);
  const rounded = (x: number): number => Number(x.toFixed(3));
  process.stdout.write(
    `append → visible in tail --follow, ${lat.length} events: p50 ${quantile(lat, 0.5).toFixed(2)} ms, p99 ${quantile(lat, 0.99).toFixed(2)} ms, max ${lat.at(-1)!.toFixed(2)} ms\n`,
  );
  process.stdout.write(
    JSON.stringify({
      bench: "tail-latency",
      events: lat.length,
      p50Ms: rounded(quantile(lat, 0.5)),
      p90Ms: rounded(quantile(lat, 0.9)),
      p99Ms: rounded(quantile(lat, 0.99)),
      maxMs: rounded(lat.at(-1)!),
      goalP99Ms: 10,
      ratio: rounded(10 / quantile(lat, 0.99)),
    }) + "\n",
  );
} finally {
  child.kill("SIGTERM");
  await log.destroy(session);
  await store.close();
}
