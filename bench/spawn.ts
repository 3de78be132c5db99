// runTurn vs bare `claude -p` spawns that only read stdout to the end: same script, same env,
// interleaved, one run. Ratio = total runTurn wall time / total bare wall time.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveClaudeBin, runTurn } from "../src/cli/index.ts";
import { startScriptedServer } from "../test/cli/_model.ts";
import { hermeticEnv } from "../test/cli/_support.ts";

const N = Number(process.argv[2] ?? 20);
const server = await startScriptedServer([{ text: "ok" }]);
const bin = resolveClaudeBin();
const cwd = mkdtempSync(join(tmpdir(), "ts-bench-spawn-"));
const env = hermeticEnv(server.url);
const args = ["-p", "--output-format", "stream-json", "--verbose"];

async function bare(): Promise<number> {
  const t0 = performance.now();
  const child = spawn(bin, args, {
    cwd,
    env: { ...process.env, ...env, FORCE_COLOR: "0" },
    stdio: ["pipe", "pipe", "ignore"],
  });
  child.stdin.end("say ok");
  child.stdout.on("data", () => {});
  await new Promise((r) => child.once("close", r));
  return performance.now() - t0;
}

async function ours(): Promise<number> {
  const t0 = performance.now();
  const h = runTurn({ cwd, prompt: "say ok", env });
  for await (const _ of h.lines);
  await h.outcome;
  return performance.now() - t0;
}

// Priming (page cache, first-run files) not counted.
await bare();
await ours();
const a: number[] = [];
const b: number[] = [];
for (let i = 0; i < N; i++) {
  // Alternate which goes first so drift hits both equally.
  if (i % 2 === 0) {
    a.push(await ours());
    b.push(await bare());
  } else {
    b.push(await bare());
    a.push(await ours());
  }
}
await server.close();
const sum = (x: number[]): number => x.reduce((s, v) => s + v, 0);
const median = (x: number[]): number => [...x].sort((p, q) => p - q)[Math.floor(x.length / 2)]!;
const ratio = sum(a) / sum(b);
process.stdout.write(`runTurn: total ${sum(a).toFixed(0)} ms, median ${median(a).toFixed(1)} ms over ${N}\n`);
process.stdout.write(`bare:    total ${sum(b).toFixed(0)} ms, median ${median(b).toFixed(1)} ms over ${N}\n`);
process.stdout.write(
  JSON.stringify({
    bench: "spawn",
    ratio: Number(ratio.toFixed(4)),
    turns: N,
    runTurnMs: Math.round(sum(a)),
    bareMs: Math.round(sum(b)),
    runTurnMedianMs: Number(median(a).toFixed(1)),
    bareMedianMs: Number(median(b).toFixed(1)),
  }) + "\n",
);
