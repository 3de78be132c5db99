// The model gateway's cost, with the processes as in a worker: the scripted model server and the
// clients (the CLI, and a small client for first-byte times) in processes of their own, the gateway in
// this one. The same CLI turns straight to the model server and through the gateway, alternating, one
// run; then streaming requests both ways. Figures: wall time per turn (ratio, goal ≤ 1.03), this
// process's CPU per request through the gateway (all of it the gateway's: nothing else runs here
// then), and the time to first byte added at p50 and p95 (goal ≤ +5 ms at p95 on loopback).
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { runTurn } from "../src/runner/index.ts";
import { credentialFrom, startGateway, type ModelCall } from "../src/gateway/index.ts";
import { hermeticEnv } from "../src/testing/index.ts";
import { quantile } from "./_stats.ts";

const TURNS = Number(process.argv[2] ?? 12);
const REQUESTS = Number(process.argv[3] ?? 300);
const KEY = "sk-ant-api03-bench-key-0000000000000000000000000000";
const NODE = process.execPath;
const here = import.meta.dirname;

/** `turnstream model-server` in its own process; resolves with its URL once it listens. */
async function modelServer(dir: string): Promise<{ url: string; stop(): void }> {
  // An empty script: every request gets the text "done", one model call per turn.
  const script = join(dir, "script.json");
  writeFileSync(script, JSON.stringify({ responses: [] }));
  const child = spawn(
    NODE,
    [join(here, "..", "src", "bin", "turnstream.ts"), "model-server", "--script", script, "--port", "0"],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  for await (const line of createInterface({ input: child.stdout! })) {
    const match = /listening on (\S+)/.exec(line);
    if (match !== null) return { url: match[1]!, stop: () => void child.kill("SIGTERM") };
  }
  throw new Error("the model server did not start");
}

const dir = mkdtempSync(join(tmpdir(), "ts-bench-gw-"));
const server = await modelServer(dir);
const gateway = await startGateway();
const calls: ModelCall[] = [];
const grant = gateway.issue(
  { baseUrl: new URL(server.url), credential: credentialFrom({ ANTHROPIC_API_KEY: KEY }, undefined)! },
  { binding: { session: "bench" }, onCall: (c) => calls.push(c) },
);
const cwd = mkdtempSync(join(tmpdir(), "ts-bench-gw-ws-"));
const run = hermeticEnv({ baseUrl: server.url, apiKey: KEY });
const envs = { direct: run.env, gateway: { ...run.env, ...gateway.runEnv(grant) } };

type Way = keyof typeof envs;
const wall: Record<Way, number[]> = { direct: [], gateway: [] };

async function turn(way: Way): Promise<void> {
  const t0 = performance.now();
  const handle = runTurn({ cwd, prompt: "say done", env: envs[way] });
  for await (const _ of handle.lines);
  const outcome = await handle.outcome;
  if (outcome.resultText !== "done") throw new Error(`${way} turn answered ${JSON.stringify(outcome.resultText)}`);
  wall[way].push(performance.now() - t0);
}

/** First-byte times from the client process; this process's CPU meanwhile is the gateway's. */
async function firstBytes(): Promise<{ ttfbs: Record<Way, number[]>; cpuMs: number; requests: number }> {
  const env = {
    ...process.env,
    GW_DIRECT: server.url,
    GW_GATEWAY: gateway.url,
    GW_TOKEN: grant.token,
    GW_REQUESTS: String(REQUESTS),
  };
  const child = spawn(NODE, [join(here, "_gateway-client.ts")], { env, stdio: ["ignore", "pipe", "inherit"] });
  let c0 = process.cpuUsage();
  let before = calls.length;
  for await (const line of createInterface({ input: child.stdout! })) {
    if (line === "ready") {
      c0 = process.cpuUsage();
      before = calls.length;
      continue;
    }
    const cpu = process.cpuUsage(c0);
    return {
      ttfbs: JSON.parse(line) as Record<Way, number[]>,
      cpuMs: (cpu.user + cpu.system) / 1000,
      requests: calls.length - before,
    };
  }
  throw new Error("the first-byte client printed no result");
}

await turn("direct");
await turn("gateway");
wall.direct = [];
wall.gateway = [];
for (let turnIndex = 0; turnIndex < TURNS; turnIndex++) {
  // Alternate which goes first so drift hits both equally.
  for (const way of (turnIndex % 2 === 0 ? ["gateway", "direct"] : ["direct", "gateway"]) as Way[]) await turn(way);
}
const { ttfbs, cpuMs, requests: gatewayRequests } = await firstBytes();
await gateway.close();
server.stop();
run.cleanup();

const sum = (x: number[]): number => x.reduce((s, v) => s + v, 0);
const r2 = (n: number): number => Number(n.toFixed(2));
const wallRatio = sum(wall.gateway) / sum(wall.direct);
const ttfbAddedP95Ms = quantile(ttfbs.gateway, 0.95) - quantile(ttfbs.direct, 0.95);
for (const route of ["direct", "gateway"] as const) {
  process.stdout.write(
    `${route.padEnd(8)} turns: total ${sum(wall[route]).toFixed(0)} ms, median ${quantile(wall[route], 0.5).toFixed(1)} ms; ttfb p50 ${quantile(ttfbs[route], 0.5).toFixed(2)} ms, p95 ${quantile(ttfbs[route], 0.95).toFixed(2)} ms\n`,
  );
}
process.stdout.write(`gateway CPU: ${cpuMs.toFixed(0)} ms for ${gatewayRequests} requests\n`);
process.stdout.write(
  JSON.stringify({
    bench: "gateway",
    wallRatio: Number(wallRatio.toFixed(4)),
    ttfbAddedP95Ms: r2(ttfbAddedP95Ms),
    ttfbAddedP50Ms: r2(quantile(ttfbs.gateway, 0.5) - quantile(ttfbs.direct, 0.5)),
    cpuPerCallMs: r2(cpuMs / gatewayRequests),
    turns: TURNS,
    requests: REQUESTS,
    directMedianMs: r2(quantile(wall.direct, 0.5)),
    gatewayMedianMs: r2(quantile(wall.gateway, 0.5)),
  }) + "\n",
);
