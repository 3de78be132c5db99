// runTurn vs bare `claude -p` spawns that only read stdout to the end: same script, same env,
// interleaved, one run. Ratio = total runTurn wall time / total bare wall time.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveClaudeBin, runTurn } from "../src/runner/index.ts";
import { startScriptedServer } from "../test/runner/_model.ts";
import { hermeticEnv } from "../test/runner/_support.ts";
import { median } from "./_stats.ts";

const TURNS = Number(process.argv[2] ?? 20);
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
  const handle = runTurn({ cwd, prompt: "say ok", env });
  for await (const _ of handle.lines);
  await handle.outcome;
  return performance.now() - t0;
}

// Priming (page cache, first-run files) not counted.
await bare();
await ours();
const oursMs: number[] = [];
const bareMs: number[] = [];
for (let index = 0; index < TURNS; index++) {
  // Alternate which goes first so drift hits both equally.
  if (index % 2 === 0) {
    oursMs.push(await ours());
    bareMs.push(await bare());
  } else {
    bareMs.push(await bare());
    oursMs.push(await ours());
  }
}
await server.close();
const sum = (x: number[]): number => x.reduce((s, v) => s + v, 0);
const ratio = sum(oursMs) / sum(bareMs);
process.stdout.write(
  `runTurn: total ${sum(oursMs).toFixed(0)} ms, median ${median(oursMs).toFixed(1)} ms over ${TURNS}\n`,
);
process.stdout.write(
  `bare:    total ${sum(bareMs).toFixed(0)} ms, median ${median(bareMs).toFixed(1)} ms over ${TURNS}\n`,
);
process.stdout.write(
  JSON.stringify({
    bench: "spawn",
    ratio: Number(ratio.toFixed(4)),
    turns: TURNS,
    runTurnMs: Math.round(sum(oursMs)),
    bareMs: Math.round(sum(bareMs)),
    runTurnMedianMs: Number(median(oursMs).toFixed(1)),
    bareMedianMs: Number(median(bareMs).toFixed(1)),
  }) + "\n",
);
