// The model gateway's cost: the same CLI turns straight to the scripted model server and through a
// loopback gateway holding the key, alternating, one run; then streaming requests both ways to time
// the first byte. Figures: wall time per turn (ratio, goal ≤ 1.03), this process's CPU per model
// call added by the gateway (the gateway runs here, as in a worker), and the time to first byte
// added at p95 (goal ≤ +5 ms on loopback).
import { mkdtempSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runTurn } from "../src/cli/index.ts";
import { credentialFrom, startGateway, type ModelCall } from "../src/gateway/index.ts";
import { hermeticEnv, startModelServer } from "../src/testing/index.ts";

const TURNS = Number(process.argv[2] ?? 12);
const REQUESTS = Number(process.argv[3] ?? 300);
const KEY = "sk-ant-api03-bench-key-0000000000000000000000000000";

// Every request gets the text "done" once the (empty) script is used up: one model call per turn.
const server = await startModelServer({ script: { responses: [] }, credential: KEY });
const gateway = await startGateway();
const calls: ModelCall[] = [];
const grant = gateway.issue({ baseUrl: new URL(server.url), credential: credentialFrom({ ANTHROPIC_API_KEY: KEY }, undefined)! }, { binding: { session: "bench" }, onCall: (c) => calls.push(c) });
const cwd = mkdtempSync(join(tmpdir(), "ts-bench-gw-"));
const run = hermeticEnv({ baseUrl: server.url, apiKey: KEY });
const envs = { direct: run.env, gateway: { ...run.env, ...gateway.runEnv(grant) } };

type Way = keyof typeof envs;
const wall: Record<Way, number[]> = { direct: [], gateway: [] };
const cpu: Record<Way, number[]> = { direct: [], gateway: [] };
const callsOf: Record<Way, number> = { direct: 0, gateway: 0 };

async function turn(way: Way): Promise<void> {
  const before = server.requests().length;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const h = runTurn({ cwd, prompt: "say done", env: envs[way] });
  for await (const _ of h.lines);
  const outcome = await h.outcome;
  if (outcome.resultText !== "done") throw new Error(`${way} turn answered ${JSON.stringify(outcome.resultText)}`);
  wall[way].push(performance.now() - t0);
  const c = process.cpuUsage(c0);
  cpu[way].push((c.user + c.system) / 1000);
  callsOf[way] += server.requests().length - before;
}

/** Time from sending a streaming Messages request to the first byte of its answer's body. */
function ttfb(base: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = request(`${base}/v1/messages?beta=true`, { method: "POST", headers: { "x-api-key": grant.token, "content-type": "application/json", "anthropic-version": "2023-06-01", "content-length": Buffer.byteLength(body) } }, (res) => {
      let first: number | undefined;
      res.on("data", () => (first ??= performance.now() - t0));
      res.on("end", () => resolve(first ?? Number.NaN));
    });
    req.on("error", reject);
    req.end(body);
  });
}

// A request the size of a CLI turn's (system prompt, tools, messages: tens of KiB).
const body = JSON.stringify({ model: "claude-sonnet-4-5", stream: true, max_tokens: 64, system: "s".repeat(24_000), tools: [{ name: "Bash", description: "d".repeat(8000) }], messages: [{ role: "user", content: "say done" }] });

await turn("direct");
await turn("gateway");
for (const w of ["direct", "gateway"] as const) {
  wall[w] = [];
  cpu[w] = [];
  callsOf[w] = 0;
}
for (let i = 0; i < TURNS; i++) {
  // Alternate which goes first so drift hits both equally.
  for (const way of (i % 2 === 0 ? ["gateway", "direct"] : ["direct", "gateway"]) as Way[]) await turn(way);
}
const ttfbs: Record<Way, number[]> = { direct: [], gateway: [] };
for (let i = 0; i < REQUESTS; i++) {
  for (const way of (i % 2 === 0 ? ["gateway", "direct"] : ["direct", "gateway"]) as Way[]) ttfbs[way].push(await ttfb(way === "direct" ? server.url : gateway.url, body));
}
await gateway.close();
await server.close();
run.cleanup();

const sum = (x: number[]): number => x.reduce((s, v) => s + v, 0);
const pct = (x: number[], p: number): number => [...x].sort((a, b) => a - b)[Math.min(x.length - 1, Math.floor(x.length * p))]!;
const r2 = (n: number): number => Number(n.toFixed(2));
const wallRatio = sum(wall.gateway) / sum(wall.direct);
const cpuAddedPerCallMs = sum(cpu.gateway) / callsOf.gateway - sum(cpu.direct) / callsOf.direct;
const ttfbAddedP95Ms = pct(ttfbs.gateway, 0.95) - pct(ttfbs.direct, 0.95);
for (const w of ["direct", "gateway"] as const) {
  process.stdout.write(`${w.padEnd(8)} turns: total ${sum(wall[w]).toFixed(0)} ms, median ${pct(wall[w], 0.5).toFixed(1)} ms; cpu here ${(sum(cpu[w]) / callsOf[w]).toFixed(2)} ms per model call; ttfb p50 ${pct(ttfbs[w], 0.5).toFixed(2)} ms, p95 ${pct(ttfbs[w], 0.95).toFixed(2)} ms\n`);
}
process.stdout.write(
  JSON.stringify({
    bench: "gateway",
    wallRatio: Number(wallRatio.toFixed(4)),
    ttfbAddedP95Ms: r2(ttfbAddedP95Ms),
    ttfbAddedP50Ms: r2(pct(ttfbs.gateway, 0.5) - pct(ttfbs.direct, 0.5)),
    cpuAddedPerCallMs: r2(cpuAddedPerCallMs),
    turns: TURNS,
    requests: REQUESTS,
    modelCalls: calls.length,
    directMedianMs: r2(pct(wall.direct, 0.5)),
    gatewayMedianMs: r2(pct(wall.gateway, 0.5)),
  }) + "\n",
);
