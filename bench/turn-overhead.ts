// 40 turns over 4 sessions through producer → BullMQ → worker (concurrency 2) → event log, against 40
// bare `claude -p` runs doing the same CLI work (same 4 sessions, later turns --resume, 2 at a time)
// with the same script. Each side runs in processes of its own (bench/_turn-side.ts).
//
// Default, "shared": both sides run at the same time, rounds back to back, each in a cgroup of its
// own capped at one CPU (Redis joins the queued side's), so whatever slows the host at a given moment
// slows both alike. On this shared host one CLI turn's CPU swung from 554 to 695 ms between rounds a
// minute apart, and the sequential figure for one piece of code ranged from 0.92 to 1.13 in a day.
// Caps, not equal shares: with shares a side that waits (on a spawn, on its model server) hands its
// time to the other, and round ratios ranged 0.77-1.09 at a steady CPU ratio. A round counts once both
// sides have finished it while the other was still running; ratio = queued time / bare time summed
// over those rounds, cpuRatio = the same for the CPU the two cgroups used.
//
// `--sequential` (also the fallback where cgroups cannot be made: not root, no cpu controller): the
// two sides take turns with the whole machine, B Q Q B … seven rounds each, and the best of each
// side counts (the bench's earlier form).
//
// `npm run bench -- turn-overhead [rounds] [--sequential]`
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { NODE } from "../test/worker/_support.ts";

const TURNS = 40;
const argv = process.argv.slice(2);
const ROUNDS = Number(argv.find((a) => /^\d+$/.test(a)) ?? 6);
const HIERARCHIES = ["cpu", "cpuacct"] as const;
const CGROUP_ROOT = "/sys/fs/cgroup";
const PERIOD_US = 20_000;

type Line = {
  ready?: boolean;
  pids?: number[];
  round?: number;
  start?: number;
  end?: number;
  cpuMs?: number;
  done?: boolean;
};
interface Round {
  start: number;
  end: number;
  ms: number;
  cpuMs: number;
}

class SideProcess {
  readonly child: ChildProcess;
  readonly #lines: Line[] = [];
  #wake: (() => void) | undefined;
  #exit: Error | undefined;
  readonly name: "bare" | "queued";

  constructor(name: "bare" | "queued", env: Record<string, string>) {
    this.name = name;
    this.child = spawn(NODE, [join(import.meta.dirname, "_turn-side.ts"), name, String(TURNS)], {
      env: { ...process.env, ...env },
      stdio: ["pipe", "pipe", "inherit"],
    });
    createInterface({ input: this.child.stdout! }).on("line", (text) => {
      try {
        this.#lines.push(JSON.parse(text) as Line);
      } catch {
        return;
      }
      this.#wake?.();
    });
    this.child.once("exit", (code) => {
      this.#exit = new Error(`the ${name} side exited (code ${code}) before it was done`);
      this.#wake?.();
    });
  }

  async next(): Promise<Line> {
    for (;;) {
      const line = this.#lines.shift();
      if (line !== undefined) return line;
      if (this.#exit !== undefined) throw this.#exit;
      await new Promise<void>((r) => (this.#wake = r));
    }
  }

  /** Runs `n` rounds; resolves with them once the side says it is done. */
  async rounds(count: number): Promise<Round[]> {
    this.child.stdin!.write(`go ${count}\n`);
    const out: Round[] = [];
    for (let line = await this.next(); line.done !== true; line = await this.next()) {
      if (line.round !== undefined)
        out.push({ start: line.start!, end: line.end!, ms: line.end! - line.start!, cpuMs: line.cpuMs! });
    }
    return out;
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once("exit", r));
    this.child.stdin!.end();
    await exited;
  }
}

/** Two sibling cgroups with equal CPU shares, or undefined where this process cannot make them. */
function makeGroups():
  | {
      path(side: string, hierarchy: string): string;
      join(side: string, pid: number): void;
      restore(): void;
      remove(): void;
    }
  | undefined {
  if (process.getuid?.() !== 0 || !HIERARCHIES.every((h) => existsSync(join(CGROUP_ROOT, h, "cgroup.procs"))))
    return undefined;
  const name = (side: string): string => `turnstream-bench-${process.pid}-${side}`;
  const path = (side: string, h: string): string => join(CGROUP_ROOT, h, name(side));
  const moved = new Map<number, Map<string, string>>(); // pid → hierarchy → the cgroup it came from
  try {
    for (const side of ["bare", "queued"]) {
      for (const hierarchy of HIERARCHIES) mkdirSync(path(side, hierarchy), { recursive: true });
      writeFileSync(join(path(side, "cpu"), "cpu.cfs_period_us"), String(PERIOD_US));
      writeFileSync(join(path(side, "cpu"), "cpu.cfs_quota_us"), String(PERIOD_US));
    }
  } catch {
    return undefined;
  }
  return {
    path,
    join(side, pid) {
      const from = new Map<string, string>();
      for (const line of readFileSync(`/proc/${pid}/cgroup`, "utf8").split("\n")) {
        const [, controllers, groupPath] = line.split(":");
        for (const hierarchy of HIERARCHIES)
          if (controllers?.split(",").includes(hierarchy)) from.set(hierarchy, groupPath!);
      }
      moved.set(pid, from);
      for (const hierarchy of HIERARCHIES) writeFileSync(join(path(side, hierarchy), "cgroup.procs"), String(pid));
    },
    restore() {
      for (const [pid, from] of moved) {
        for (const [hierarchy, groupPath] of from) {
          try {
            writeFileSync(join(CGROUP_ROOT, hierarchy, groupPath, "cgroup.procs"), String(pid));
          } catch {
            // it has exited
          }
        }
      }
    },
    remove() {
      for (const side of ["bare", "queued"])
        for (const hierarchy of HIERARCHIES) {
          try {
            rmdirSync(path(side, hierarchy));
          } catch {
            // a combined cpu,cpuacct mount: already gone
          }
        }
    },
  };
}

const groups = argv.includes("--sequential") ? undefined : makeGroups();
const mode = groups === undefined ? "sequential" : "shared";
const sides = (["bare", "queued"] as const).map((name) => {
  const side = new SideProcess(
    name,
    groups === undefined ? {} : { TS_BENCH_CPUACCT: join(groups.path(name, "cpuacct"), "cpuacct.usage") },
  );
  groups?.join(name, side.child.pid!);
  return side;
});
const [bare, queued] = sides as [SideProcess, SideProcess];

let result: {
  ratio: number;
  cpuRatio: number;
  rounds: number;
  queuedMs: number;
  bareMs: number;
  spread?: [number, number];
};
try {
  for (const side of sides) {
    const line = await side.next();
    if (line.ready !== true) throw new Error(`the ${side.name} side did not start`);
    for (const pid of line.pids ?? []) groups?.join(side.name, pid); // the worker is there already; Redis is not
  }
  if (groups !== undefined) {
    const [bareRounds, queuedRounds] = await Promise.all([bare.rounds(ROUNDS), queued.rounds(ROUNDS)]);
    // Only rounds both sides finished while the other still ran: past that, one has the machine alone.
    const until = Math.min(bareRounds.at(-1)!.end, queuedRounds.at(-1)!.end);
    const pairs = bareRounds
      .map((r, i) => [r, queuedRounds[i]!] as const)
      .filter(([x, y]) => x.end <= until && y.end <= until);
    if (pairs.length === 0) throw new Error("no round ran on both sides at once; give more rounds");
    const sum = (f: (pair: (typeof pairs)[number]) => number): number => pairs.reduce((a, p) => a + f(p), 0);
    for (const [bareRound, queuedRound] of pairs)
      process.stdout.write(
        `round: bare ${bareRound.ms.toFixed(0)} ms, queued ${queuedRound.ms.toFixed(0)} ms, ratio ${(queuedRound.ms / bareRound.ms).toFixed(4)}; CPU per turn bare ${(bareRound.cpuMs / TURNS).toFixed(1)} ms, queued ${(queuedRound.cpuMs / TURNS).toFixed(1)} ms\n`,
      );
    const each = pairs.map(([x, y]) => y.ms / x.ms);
    result = {
      ratio: sum(([, y]) => y.ms) / sum(([x]) => x.ms),
      cpuRatio: sum(([, y]) => y.cpuMs) / sum(([x]) => x.cpuMs),
      rounds: pairs.length,
      queuedMs: sum(([, y]) => y.ms) / pairs.length,
      bareMs: sum(([x]) => x.ms) / pairs.length,
      spread: [Math.min(...each), Math.max(...each)],
    };
  } else {
    // Interleaved so that a slow moment hits both sides instead of deciding the ratio.
    const best = { bare: undefined as Round | undefined, queued: undefined as Round | undefined };
    for (const side of [
      "bare",
      "queued",
      "queued",
      "bare",
      "bare",
      "queued",
      "queued",
      "bare",
      "bare",
      "queued",
      "queued",
      "bare",
      "bare",
      "queued",
    ] as const) {
      const [round] = await (side === "bare" ? bare : queued).rounds(1);
      if (best[side] === undefined || round!.ms < best[side].ms) best[side] = round!;
      process.stdout.write(
        `round ${side.padEnd(6)} ${round!.ms.toFixed(0)} ms, machine CPU ${(round!.cpuMs / TURNS).toFixed(0)} ms per turn\n`,
      );
    }
    result = {
      ratio: best.queued!.ms / best.bare!.ms,
      cpuRatio: best.queued!.cpuMs / best.bare!.cpuMs,
      rounds: 7,
      queuedMs: best.queued!.ms,
      bareMs: best.bare!.ms,
    };
  }
} finally {
  await Promise.all(sides.map((s) => s.close()));
  groups?.restore();
  groups?.remove();
}
process.stdout.write(
  `bare:   ${TURNS} runs in ${result.bareMs.toFixed(0)} ms (2 at a time, 4 sessions, resumed)${mode === "shared" ? ", mean of the rounds" : ", best round"}\n`,
);
process.stdout.write(
  `queued: ${TURNS} turns in ${result.queuedMs.toFixed(0)} ms (worker concurrency 2, log, snapshots)\n`,
);
process.stdout.write(
  JSON.stringify({
    bench: "turn-overhead",
    ratio: Number(result.ratio.toFixed(4)),
    cpuRatio: Number(result.cpuRatio.toFixed(4)),
    mode,
    rounds: result.rounds,
    ...(result.spread !== undefined ? { roundRatios: result.spread.map((x) => Number(x.toFixed(4))) } : {}),
    turns: TURNS,
    sessions: 4,
    concurrency: 2,
    queuedMs: Math.round(result.queuedMs),
    bareMs: Math.round(result.bareMs),
  }) + "\n",
);
