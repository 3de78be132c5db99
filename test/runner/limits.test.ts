// The limit machinery against real processes and the real cgroup tree: the per-run limit cgroups are
// made only under this host's turnstream folders and removed after (the worker's own cgroups keep
// their limits untouched); where no cgroup holds a limit, the watch counts processes and sums
// resident memory; the scratch is measured by what it holds on disk.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { ownHierarchyDir, RunScope, sweepCgroups } from "../../src/runner/containment.ts";
import { LimitWatch, limitSupport, RunLimitGroups, scratchUsage, type RunLimits } from "../../src/runner/limits.ts";
import { ProcessTree } from "../../src/runner/process-tree.ts";
import { waitUntil } from "./_support.ts";

const MiB = 1024 * 1024;

/** The limit files of this process's own cgroups, which a run's limits must never change. */
function ownLimitFiles(): Record<string, string> {
  const out: Record<string, string> = {};
  const files = [
    ["pids", "pids.max"],
    ["memory", "memory.limit_in_bytes"],
    ["cpu", "cpu.cfs_quota_us"],
  ] as const;
  for (const [controller, file] of files) {
    const own = ownHierarchyDir(controller);
    if ("reason" in own || !existsSync(join(own.dir, file))) continue;
    out[`${controller}/${file}`] = readFileSync(join(own.dir, file), "latin1");
  }
  return out;
}

test("a run's limit cgroups are made under this host's turnstream folders, hold the limits, and go; the worker's own are untouched", async () => {
  const support = limitSupport();
  const before = ownLimitFiles();
  const name = randomUUID();
  const groups = RunLimitGroups.create(support, undefined, name, { pids: 33, memoryBytes: 200 * MiB, cpus: 0.25 });
  try {
    for (const dir of groups.enter) {
      assert.match(dir, new RegExp(`/turnstream/\\d+-${process.pid}-\\d+/${name}$`), "only under this host's folder");
    }
    /** The value of `file` in the run's cgroup holding it. */
    const written = (file: string): string => {
      const dir = groups.enter.find((d) => existsSync(join(d, file)));
      return readFileSync(join(dir!, file), "latin1").trim();
    };
    if (support.places.pids?.version === "v1") assert.equal(written("pids.max"), "33");
    if (support.places.memory?.version === "v1") assert.equal(written("memory.limit_in_bytes"), String(200 * MiB));
    if (support.places.cpu?.version === "v1") assert.equal(written("cpu.cfs_quota_us"), "25000");
    assert.deepEqual(ownLimitFiles(), before, "the worker's own cgroups keep their limits");
    assert.equal(groups.hit(), undefined, "nothing hit in an empty cgroup");
  } finally {
    await groups.release();
  }
  for (const dir of groups.enter) assert.equal(existsSync(dir), false, `${dir} is removed`);
});

/** A watch with no cgroup behind it: what it sees it samples. */
function watchOver(limits: RunLimits, members: () => number[], scratchDir?: string): LimitWatch {
  return new LimitWatch({ limits, groups: undefined, members, scratchDir }, () => {});
}

/** A real tree (`sh` and what it starts), its scope found by the /proc walk only: no cgroup holds it. */
function startTree(script: string): { scope: RunScope; stop: () => void } {
  const marker = randomUUID();
  const env = { ...process.env, TURNSTREAM_TREE: marker };
  const child = spawn("/bin/sh", ["-c", script], { detached: true, stdio: "ignore", env });
  const scope = new RunScope(new ProcessTree(child.pid!, marker), undefined);
  return { scope, stop: () => void scope.signal("SIGKILL") };
}

test("with no pids cgroup the watch counts the run's processes and reports limit_pids past the limit", async () => {
  const { scope, stop } = startTree("for i in $(seq 12); do sleep 297.5 & done; wait");
  try {
    await waitUntil(() => scope.members().length >= 13, 10_000, "the sleeps to start");
    const watch = watchOver({ pids: 5 }, () => scope.members());
    const hit = await watch.check();
    assert.equal(hit?.kind, "limit_pids");
    assert.match(hit.detail, /over its limit of 5 \(counted, no pids cgroup\)/);
    const roomy = watchOver({ pids: 100 }, () => scope.members());
    assert.equal(await roomy.check(), undefined);
  } finally {
    stop();
  }
});

test("with no memory cgroup the watch sums the run's resident memory and reports limit_memory past the limit", async () => {
  const hold = `const b = Buffer.alloc(${96 * MiB}, 1); setInterval(() => b[0]++, 1000);`;
  const { scope, stop } = startTree(`exec ${JSON.stringify(process.execPath)} -e ${JSON.stringify(hold)}`);
  try {
    const watch = watchOver({ memoryBytes: 64 * MiB }, () => scope.members());
    let hit: Awaited<ReturnType<LimitWatch["check"]>>;
    await waitUntil(
      () => {
        void watch.check().then((h) => (hit = h));
        return hit !== undefined;
      },
      15_000,
      "the allocation to show",
    );
    assert.equal(hit!.kind, "limit_memory");
    assert.match(hit!.detail, /over its limit of 64 MiB \(sampled, no memory cgroup\)/);
  } finally {
    stop();
  }
});

test("the scratch counts what its files hold on disk (a sparse file its blocks), and too many entries count as full", async () => {
  const dir = mkdtempSync(join(tmpdir(), "ts-scratch-"));
  writeFileSync(join(dir, "a.bin"), Buffer.alloc(3 * MiB, 1));
  mkdirSync(join(dir, "sub"));
  writeFileSync(join(dir, "sub", "b.bin"), Buffer.alloc(2 * MiB, 1));
  // 100 MiB long, nothing written: it takes no disk.
  writeFileSync(join(dir, "sparse.bin"), "");
  truncateSync(join(dir, "sparse.bin"), 100 * MiB);
  const used = await scratchUsage(dir);
  assert.ok(used.bytes >= 5 * MiB && used.bytes < 6 * MiB, `${used.bytes}`);
  assert.equal(used.entries, 4);
  const watch = (scratchBytes: number): LimitWatch => watchOver({ scratchBytes }, () => [], dir);
  assert.equal((await watch(4 * MiB).check())?.kind, "limit_disk");
  assert.equal(await watch(8 * MiB).check(), undefined);
  const capped = await scratchUsage(dir, 2);
  assert.equal(capped.entries, 3, "the walk stops at the first entry past the cap");
  assert.ok(capped.entries > 2, "which the watch reads as full");
});

test("a dead host's limit cgroup (v1) is swept: what is still in it is killed, then it is removed", async () => {
  const place = limitSupport().places.pids;
  assert.ok(place !== undefined, "this host has a pids cgroup");
  if (place.version !== "v1") return;
  // A host name no live process has: its pid is past pid_max.
  const ns = /\[(\d+)\]/.exec(readlinkSync("/proc/self/ns/pid"))![1]!;
  const deadHost = join(dirname(place.hostDir), `${ns}-4194305-1`);
  const run = join(deadHost, randomUUID());
  const child = spawn("sleep", ["296.5"], { stdio: "ignore" });
  const exited = new Promise((r) => child.once("exit", r));
  try {
    // Any worker starting on this host sweeps too (other test files start them): one may take the
    // empty folder before the sleep is in it, so the move is tried again until it holds.
    await waitUntil(
      () => {
        mkdirSync(run, { recursive: true });
        try {
          writeFileSync(join(run, "cgroup.procs"), String(child.pid));
          return readFileSync(join(run, "cgroup.procs"), "latin1").trim() === String(child.pid);
        } catch {
          return false;
        }
      },
      10_000,
      "the sleep in the cgroup",
    );
    const swept = sweepCgroups();
    await exited;
    // Once the sleep is in it, any sweep kills it before removing the folder; ours is the one that
    // ran unless a worker's sweep got there between the two lines above.
    assert.ok(swept.removed.includes(run) || !existsSync(run), `removed: ${swept.removed.join(", ")}`);
    assert.equal(existsSync(deadHost), false, "the dead host's folder goes too");
  } finally {
    child.kill("SIGKILL");
  }
});
