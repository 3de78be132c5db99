// What importing each entry of the package costs a fresh Node process, beside the Claude Agent SDK's
// import (the library a program running turns in-process would otherwise use). Each target is
// imported by a new process `reps` times, targets interleaved so drift hits all alike; figures are
// medians of the whole process's CPU (user + system, Node's own start-up included), of the import's
// share of it, and of the process's peak RSS. The SDK is installed once into a cache folder, not
// into the project. Ratios: turnstream/runner over the SDK, on CPU and on peak RSS (goal: ≤ 1).
// `npm run bench -- import [reps]`
import { execFile, execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { ensureBuilt, repoRoot } from "../test/support/build.ts";
import { median } from "./_stats.ts";

const run = promisify(execFile);
const REPS = Number(process.argv[2] ?? 7);
/** The SDK release that bundles the Claude Code version the project depends on. */
const SDK_PACKAGE = "@anthropic-ai/claude-agent-sdk";
const SDK_VERSION = "0.3.332";
const sdkDir = join(
  process.env["XDG_CACHE_HOME"] ?? join(homedir(), ".cache"),
  "turnstream-bench",
  `agent-sdk-${SDK_VERSION}`,
);

/** Imports argv[1] and prints the process's CPU so far, the import's share of it, and its peak RSS. */
const MEASURE = `
const cpuMs = (usage) => (usage.user + usage.system) / 1000;
const before = process.cpuUsage();
await import(process.argv[1]);
const importCpuMs = cpuMs(process.cpuUsage(before));
process.stdout.write(JSON.stringify({ cpuMs: cpuMs(process.cpuUsage()), importCpuMs, peakRssMb: process.resourceUsage().maxRSS / 1024 }));
`;

interface Sample {
  cpuMs: number;
  importCpuMs: number;
  peakRssMb: number;
}

interface Target {
  name: string;
  specifier: string;
  /** Where the specifier resolves from: the repo (the package imports itself by name) or the SDK's folder. */
  cwd: string;
}

/** The environment without the npm settings of the `npm run` that started this. */
function plainEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));
}

/**
 * The SDK's native CLI binaries are optional dependencies that only its query() runs; importing the
 * SDK does not open them, so they are left out of the install.
 */
function installSdk(): void {
  if (existsSync(join(sdkDir, "node_modules", SDK_PACKAGE, "package.json"))) return;
  process.stderr.write(`installing ${SDK_PACKAGE}@${SDK_VERSION} into ${sdkDir}\n`);
  execFileSync(
    "npm",
    [
      "install",
      "--prefix",
      sdkDir,
      `${SDK_PACKAGE}@${SDK_VERSION}`,
      "--omit=optional",
      "--no-audit",
      "--no-fund",
      "--loglevel=error",
    ],
    { env: plainEnv(), stdio: ["ignore", "ignore", "inherit"] },
  );
}

function targets(): Target[] {
  const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
    name: string;
    exports: Record<string, unknown>;
  };
  const entries = Object.keys(pkg.exports)
    .filter((subpath) => subpath !== "./package.json")
    .map((subpath) => pkg.name + subpath.slice(1));
  return [
    { name: "node (nothing imported)", specifier: "node:path", cwd: repoRoot },
    ...entries.map((specifier) => ({ name: specifier, specifier, cwd: repoRoot })),
    { name: `${SDK_PACKAGE}@${SDK_VERSION}`, specifier: SDK_PACKAGE, cwd: sdkDir },
  ];
}

async function measure(target: Target): Promise<Sample> {
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", MEASURE, target.specifier], {
    cwd: target.cwd,
    env: plainEnv(),
  });
  return JSON.parse(stdout) as Sample;
}

const round1 = (value: number): number => Number(value.toFixed(1));

function summarise(samples: Sample[]): Sample {
  return {
    cpuMs: round1(median(samples.map((s) => s.cpuMs))),
    importCpuMs: round1(median(samples.map((s) => s.importCpuMs))),
    peakRssMb: round1(median(samples.map((s) => s.peakRssMb))),
  };
}

ensureBuilt();
installSdk();
const all = targets();
const samples = new Map<string, Sample[]>(all.map((t) => [t.name, []]));
for (let rep = 0; rep < REPS; rep++) {
  const order = rep % 2 === 0 ? all : [...all].reverse();
  for (const target of order) samples.get(target.name)!.push(await measure(target));
}
const figures = Object.fromEntries(all.map((t) => [t.name, summarise(samples.get(t.name)!)]));
for (const [name, figure] of Object.entries(figures)) {
  process.stdout.write(
    `${name.padEnd(40)} cpu ${String(figure.cpuMs).padStart(6)} ms (import ${String(figure.importCpuMs).padStart(6)} ms)` +
      `  peak rss ${String(figure.peakRssMb).padStart(6)} MiB\n`,
  );
}
const runner = figures["turnstream/runner"]!;
const sdk = figures[`${SDK_PACKAGE}@${SDK_VERSION}`]!;
process.stdout.write(
  JSON.stringify({
    bench: "import",
    runnerCpuVsSdk: Number((runner.cpuMs / sdk.cpuMs).toFixed(3)),
    runnerRssVsSdk: Number((runner.peakRssMb / sdk.peakRssMb).toFixed(3)),
    reps: REPS,
    sdkVersion: SDK_VERSION,
    figures,
  }) + "\n",
);
