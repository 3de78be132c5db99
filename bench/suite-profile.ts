// `npm run bench -- suite-profile [glob]`: each test file of the default suite run alone, one after
// another, with its wall time and the CPU of its whole process tree (user + system of every process
// the file's runner waited for). The suite's wall time is bounded below by its CPU over the cores,
// so this is where a slow suite shows which files to make lighter. Last line: the totals and the
// files that cost the most CPU.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { glob } from "node:fs/promises";
import { join } from "node:path";

const root = join(import.meta.dirname, "..");
const pattern = process.argv[2] ?? "test/**/*.test.ts";
const TICK_MS = 10; // USER_HZ is 100 on Linux

/** CPU ms of the children this process has waited for (and, through them, theirs). */
function reapedChildrenCpuMs(): number {
  const fields = readFileSync("/proc/self/stat", "latin1").split(") ")[1]!.split(" ");
  return (Number(fields[13]) + Number(fields[14])) * TICK_MS;
}

interface FileCost {
  file: string;
  wallSeconds: number;
  cpuSeconds: number;
  passed: boolean;
}

async function profile(file: string): Promise<FileCost> {
  const cpuBefore = reapedChildrenCpuMs();
  const startedAt = performance.now();
  const child = spawn(process.execPath, ["--test", "--test-timeout=180000", file], {
    cwd: root,
    stdio: "ignore",
    env: { ...process.env, NODE_COMPILE_CACHE: join(root, "node_modules", ".cache", "node-compile") },
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  return {
    file,
    wallSeconds: (performance.now() - startedAt) / 1000,
    cpuSeconds: (reapedChildrenCpuMs() - cpuBefore) / 1000,
    passed: code === 0,
  };
}

const files: string[] = [];
for await (const file of glob(pattern, { cwd: root })) files.push(file);
files.sort();
const costs: FileCost[] = [];
for (const file of files) {
  const cost = await profile(file);
  costs.push(cost);
  const verdict = cost.passed ? "" : "  (failed)";
  process.stdout.write(
    `${cost.cpuSeconds.toFixed(1).padStart(7)} s CPU ${cost.wallSeconds.toFixed(1).padStart(7)} s  ${file}${verdict}\n`,
  );
}
const total = (pick: (cost: FileCost) => number): number => costs.reduce((sum, cost) => sum + pick(cost), 0);
const byCpu = [...costs].sort((left, right) => right.cpuSeconds - left.cpuSeconds);
process.stdout.write(
  JSON.stringify({
    bench: "suite-profile",
    files: costs.length,
    failed: costs.filter((cost) => !cost.passed).map((cost) => cost.file),
    wallSeconds: Math.round(total((cost) => cost.wallSeconds)),
    cpuSeconds: Math.round(total((cost) => cost.cpuSeconds)),
    top: byCpu.slice(0, 15).map((cost) => ({ file: cost.file, cpuSeconds: Number(cost.cpuSeconds.toFixed(1)) })),
  }) + "\n",
);
