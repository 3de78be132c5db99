// Instance ids and `turnstream sweep`, with real processes: processes claiming ids at the same moment
// each get their own; an id a live process holds is refused and a dead one's is taken back; the sweep
// command removes what dead runs left (dry run first), keeps live runs' homes, and under --all leaves
// an instance a running process holds alone.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { processStartTime } from "../../src/runner/index.ts";
import { claimInstanceSlot, defaultInstanceStem, InstanceIdTakenError } from "../../src/runner/index.ts";
import { onlyJson, turnstream } from "./_cli.ts";

const NODE = join(process.cwd(), "node_modules", ".bin", "node");
const SLOT_MODULE = join(process.cwd(), "src", "runner", "instance-slot.ts");

interface Holder {
  child: ChildProcess;
  /** The id it holds, or the error it met. */
  said: Promise<string>;
  exited: Promise<unknown>;
}

/** A process that claims an instance id (or the lowest free one), says which, and holds it until its stdin closes. */
function holder(root: string, instanceId?: string): Holder {
  const code = `
    const { claimInstanceSlot } = await import(${JSON.stringify(SLOT_MODULE)});
    try {
      const slot = await claimInstanceSlot({ instanceRoot: ${JSON.stringify(root)}, instanceId: ${JSON.stringify(instanceId)} });
      console.log("held " + slot.instanceId);
      process.stdin.on("end", () => { slot.release(); process.exit(0); });
      process.stdin.resume();
    } catch (err) { console.log("refused " + err.name); process.exit(0); }`;
  const child = spawn(NODE, ["--input-type=module", "-e", code], { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  // A holder that dies before saying anything (its module failed to load) fails the test at once.
  const said = new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", resolve);
    void exited.then((code) =>
      reject(new Error(`the holder exited (code ${String(code)}) before saying what it holds`)),
    );
  });
  return { child, said, exited };
}

async function release(...hs: Holder[]): Promise<void> {
  for (const holding of hs) holding.child.stdin!.end();
  await Promise.all(hs.map((h) => h.exited));
}

/** The pid of a process that has ended. */
async function deadPid(): Promise<number> {
  const child = spawn(NODE, ["-e", ""], { stdio: "ignore" });
  await new Promise((resolve) => child.once("exit", resolve));
  return child.pid!;
}

test("processes claiming at the same moment get distinct ids, the lowest free ones; a held id is refused, a dead holder's is taken back", async (testContext) => {
  const root = mkdtempSync(join(tmpdir(), "ts-slot-"));
  const started: Holder[] = [];
  const hold = (instanceId?: string): Holder => {
    const claimant = holder(root, instanceId);
    started.push(claimant);
    return claimant;
  };
  // A failed assertion must not leave holders running: their pipes would keep this file alive.
  testContext.after(() => {
    for (const claimant of started) claimant.child.kill("SIGKILL");
  });
  const four = [0, 1, 2, 3].map(() => hold());
  const ids = await Promise.all(four.map((h) => h.said));
  const stem = defaultInstanceStem();
  assert.deepEqual(
    [...ids].sort(),
    [0, 1, 2, 3].map((n) => `held ${stem}-${n}`),
  );

  // Slot 1 freed by a clean release: the next claim takes it, not slot 4. (Which of the four holds
  // slot 1 is up to the race.)
  const second = four[ids.indexOf(`held ${stem}-1`)]!;
  await release(second);
  const again = hold();
  assert.equal(await again.said, `held ${stem}-1`);

  // An explicit id: refused while a live process holds it, taken once that process was killed.
  const named = hold("pod-a");
  assert.equal(await named.said, "held pod-a");
  const rival = hold("pod-a");
  assert.equal(await rival.said, "refused InstanceIdTakenError");
  named.child.kill("SIGKILL");
  await named.exited;
  const slot = await claimInstanceSlot({ instanceRoot: root, instanceId: "pod-a" });
  assert.equal(slot.instanceId, "pod-a");
  assert.equal(readdirSync(join(root, "instances", "pod-a", "owner")).length, 1, "the dead holder's claim was removed");
  await assert.rejects(
    claimInstanceSlot({ instanceRoot: root, instanceId: "pod-a" }),
    InstanceIdTakenError,
    "this process holds it now",
  );
  slot.release();
  assert.deepEqual(readdirSync(join(root, "instances", "pod-a", "owner")), [], "released on close");
  await release(...four.filter((h) => h !== second), again, rival);
});

/** A config home of `instance` with a lock naming `pid` (none: no lock), last changed `ageMs` ago. */
function home(
  root: string,
  instance: string,
  run: string,
  lock: { pid: number; start?: string | undefined } | undefined,
  ageMs = 0,
): string {
  const inst = join(root, "instances", instance);
  const dir = join(inst, "config-homes", run);
  mkdirSync(join(dir, "tmp"), { recursive: true });
  writeFileSync(join(dir, ".credentials.json"), '{"claudeAiOauth":{"refreshToken":"sk-ant-ort01-secret"}}');
  if (lock !== undefined) {
    mkdirSync(join(inst, "live"), { recursive: true });
    writeFileSync(
      join(inst, "live", `${run}.lock`),
      JSON.stringify({ ...lock, runId: run, createdAt: new Date().toISOString() }),
    );
  }
  const mtimeSeconds = (Date.now() - ageMs) / 1000;
  utimesSync(dir, mtimeSeconds, mtimeSeconds);
  return dir;
}

test("turnstream sweep: --dry-run removes nothing, then the dead runs' homes go; live and young homes stay; --all skips a held instance", async () => {
  const root = mkdtempSync(join(tmpdir(), "ts-sweepcmd-"));
  const dead = await deadPid();
  const liveHolder = holder(root, "held-inst");
  assert.equal(await liveHolder.said, "held held-inst");
  const live = { pid: liveHolder.child.pid!, start: processStartTime(liveHolder.child.pid!) };
  const crashed = home(root, "old-inst", "t1.1.4", { pid: dead });
  const stale = home(root, "old-inst", "t2.1.2", undefined, 2 * 3600_000);
  const young = home(root, "old-inst", "t3.1.1", undefined);
  const running = home(root, "old-inst", "t4.1.9", live);
  const heldDead = home(root, "held-inst", "t5.1.1", { pid: dead });
  const env = { TURNSTREAM_INSTANCE_ROOT: root };
  try {
    const dry = await turnstream(["sweep", "--all", "--dry-run", "--json"], env);
    assert.equal(dry.code, 0, dry.stderr);
    const report = onlyJson(dry.stdout) as {
      dryRun: boolean;
      instances: Array<{
        instance: string;
        skipped?: string;
        heldBy?: number;
        removed: Array<{ home: string; reason: string }>;
        kept: Array<{ home: string; reason: string }>;
      }>;
    };
    assert.equal(report.dryRun, true);
    const byName = Object.fromEntries(report.instances.map((i) => [i.instance, i]));
    assert.deepEqual(Object.keys(byName).sort(), ["held-inst", "old-inst"]);
    assert.match(byName["held-inst"]!.skipped ?? "", /held by a running worker/);
    assert.equal(byName["held-inst"]!.heldBy, liveHolder.child.pid);
    assert.deepEqual(byName["old-inst"]!.removed.map((h) => h.home).sort(), ["t1.1.4", "t2.1.2"]);
    assert.match(byName["old-inst"]!.removed.find((h) => h.home === "t1.1.4")!.reason, /process has ended/);
    assert.deepEqual(byName["old-inst"]!.kept.map((h) => h.home).sort(), ["t3.1.1", "t4.1.9"]);
    assert.ok(!dry.stdout.includes("sk-ant-"), "no credential in the report");
    for (const homeDir of [crashed, stale, young, running, heldDead])
      assert.ok(existsSync(homeDir), `dry run removed ${homeDir}`);

    const real = await turnstream(["sweep", "--all"], env);
    assert.equal(real.code, 0, real.stderr);
    assert.match(real.stdout, /old-inst: removed 2 home\(s\), kept 2/);
    assert.match(real.stdout, /held-inst: skipped, held by a running worker/);
    assert.deepEqual([crashed, stale, young, running, heldDead].map(existsSync), [false, false, true, true, true]);

    // Named, a held instance is swept too: only homes no live process owns go.
    const named = await turnstream(["sweep", "--instance", "held-inst"], env);
    assert.equal(named.code, 0, named.stderr);
    assert.equal(existsSync(heldDead), false);
    for (const bad of [
      ["sweep"],
      ["sweep", "--all", "--instance", "x"],
      ["sweep", "--instance", "../x"],
      ["sweep", "--all", "--instance-root", "rel"],
    ]) {
      const refusedRun = await turnstream(bad, { TURNSTREAM_INSTANCE_ROOT: root });
      assert.equal(refusedRun.code, 2, `${bad.join(" ")}: ${refusedRun.stderr}`);
      assert.match(refusedRun.stderr, /usage: turnstream sweep/);
    }
  } finally {
    await release(liveHolder);
  }
});
