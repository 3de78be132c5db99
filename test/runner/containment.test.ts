// Containment against real processes and the real cgroup tree: a run's descendants that start their
// own session and drop the tree marker (`setsid -f env -u TURNSTREAM_TREE …`) or their whole
// environment (`env -i setsid -f …`) die with the run, whether the run is killed or its CLI exits and
// the rest is reaped; the run's cgroup is gone afterwards, and a dead host's cgroups are swept. Each
// kind the host offers is tested; proc-walk shows the residual risk the others close.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import {
  launchCommand,
  RunCgroup,
  RunScope,
  selectContainment,
  sweepCgroups,
  type ContainmentKind,
} from "../../src/runner/containment.ts";
import { runTurn } from "../../src/runner/index.ts";
import { ProcessTree } from "../../src/runner/process-tree.ts";
import {
  awaitEscapes,
  escapeCommands,
  escapeNonce,
  escapees,
  fakeCli,
  killEscapees,
  SETTLE_MS,
  startTree,
  waitUntil,
} from "./_support.ts";

const CONTAINED: readonly ContainmentKind[] = ["cgroup-v2", "cgroup-v1-freezer", "pid-namespace"];

/** Makes `kind` this process's containment, or says why the host does not offer it. */
function use(kind: ContainmentKind): string | undefined {
  const containment = selectContainment([kind]);
  return containment.kind === kind
    ? undefined
    : (containment.skipped.find((s) => s.kind === kind)?.reason ?? "not offered");
}

for (const kind of CONTAINED) {
  test(`${kind}: killing the run ends its escaped grandchildren too, and its cgroup is removed`, async (testContext) => {
    const why = use(kind);
    if (why !== undefined) return testContext.skip(why);
    const containment = selectContainment([kind]);
    const marker = randomUUID();
    const nonce = escapeNonce();
    const cgroup = containment.hostDir === undefined ? undefined : RunCgroup.create(containment, marker);
    const root = await startTree(marker, {
      script: `${escapeCommands(nonce)}; sleep 60 & setsid sleep 60 & echo started; wait`,
      launch: (file, args) => launchCommand(containment, cgroup, file, args),
    });
    try {
      await waitUntil(() => escapees(nonce).length === 2, SETTLE_MS, "both escaped sleepers");
      const scope = new RunScope(new ProcessTree(root.pid!, marker), cgroup);
      if (cgroup !== undefined)
        for (const pid of escapees(nonce))
          assert.ok(cgroup.pids().includes(pid), `escaped ${pid} is still in the cgroup`);
      const exited = new Promise((r) => root.once("exit", r));
      scope.signal("SIGKILL");
      await exited;
      await scope.release();
      // pid-namespace: the namespace dies with its pid 1, a moment after the launcher.
      await waitUntil(
        () => escapees(nonce).length === 0 && scope.members().length === 0,
        2000,
        "the escaped sleepers and the tree to die",
      );
      if (cgroup !== undefined) assert.equal(existsSync(cgroup.path), false, "the run's cgroup is removed");
    } finally {
      killEscapees(nonce);
    }
  });

  test(`${kind}: a CLI that exits leaving escaped processes behind: runTurn's reap ends them before the outcome settles`, async (testContext) => {
    const why = use(kind);
    if (why !== undefined) return testContext.skip(why);
    const nonce = escapeNonce();
    const handle = runTurn({
      cwd: mkdtempSync(join(tmpdir(), "ts-contain-")),
      prompt: "go",
      claudeBin: fakeCli(`${escapeCommands(nonce)}; ${awaitEscapes(nonce)}`),
      killGraceMs: 500,
    });
    try {
      assert.equal(handle.containment, kind);
      const outcome = await handle.outcome;
      assert.equal(outcome.resultText, "ok");
      assert.deepEqual(escapees(nonce), [], "nothing of the run is left once the outcome settled");
      if (kind !== "pid-namespace") {
        assert.ok(handle.cgroup !== undefined);
        assert.equal(existsSync(handle.cgroup), false, "the run's cgroup is removed");
      }
    } finally {
      killEscapees(nonce);
    }
  });
}

test("proc-walk (no cgroup, no namespace): the escaped processes outlive the turn, the residual risk the other kinds close", async () => {
  assert.equal(use("proc-walk"), undefined);
  const nonce = escapeNonce();
  const handle = runTurn({
    cwd: mkdtempSync(join(tmpdir(), "ts-contain-")),
    prompt: "go",
    claudeBin: fakeCli(`${escapeCommands(nonce)}; ${awaitEscapes(nonce)}`),
    killGraceMs: 200,
  });
  try {
    assert.equal(handle.cgroup, undefined);
    await handle.outcome;
    assert.equal(escapees(nonce).length, 2, "both escaped sleepers survive a /proc walk");
  } finally {
    killEscapees(nonce);
  }
});

for (const kind of ["cgroup-v2", "cgroup-v1-freezer"] as const) {
  test(`${kind}: the sweep kills and removes the run cgroups of a host that died, and leaves live hosts' alone`, async (testContext) => {
    const why = use(kind);
    if (why !== undefined) return testContext.skip(why);
    const nonce = escapeNonce();
    // A host that makes a run cgroup, starts an escaped process in it, and is SIGKILLed: what a crashed worker leaves.
    const hostCode = `
      const { selectContainment, RunCgroup, launchCommand } = await import(${JSON.stringify(join(import.meta.dirname, "..", "..", "src", "runner", "containment.ts"))});
      const { spawn } = await import("node:child_process");
      const c = selectContainment([${JSON.stringify(kind)}]);
      const cg = RunCgroup.create(c, "run-1");
      const cmd = launchCommand(c, cg, "/bin/sh", ["-c", ${JSON.stringify(`${escapeCommands(nonce)}; echo started`)}]);
      const child = spawn(cmd.file, cmd.args, { detached: true, stdio: ["ignore", "pipe", "ignore"] });
      child.stdout.once("data", () => process.stdout.write(cg.path + "\\n"));
      setInterval(() => {}, 1000);`;
    const host = spawn(process.execPath, ["--input-type=module", "-e", hostCode], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      const path = await new Promise<string>((resolve) =>
        host.stdout!.once("data", (b: Buffer) => resolve(b.toString().trim())),
      );
      await waitUntil(() => escapees(nonce).length === 2, SETTLE_MS, "the dead host's escaped sleepers");
      const mine = selectContainment([kind]);
      const ownRun = RunCgroup.create(mine, randomUUID());
      const before = sweepCgroups();
      assert.ok(before.live.includes(dirname(path)), "a live host's cgroups are left alone");
      assert.ok(existsSync(path));
      host.kill("SIGKILL");
      await new Promise((r) => host.once("exit", r));
      const after = sweepCgroups();
      assert.ok(after.removed.includes(path), `removed: ${after.removed.join(", ")}`);
      assert.equal(existsSync(dirname(path)), false, "the dead host's folder is removed");
      assert.deepEqual(escapees(nonce), [], "what was still in its cgroup is killed");
      assert.ok(existsSync(ownRun.path), "a live run of this host is left alone");
      assert.ok(!after.removed.includes(ownRun.path));
      assert.equal(ownRun.remove(), true);
      assert.ok(!readdirSync(dirname(ownRun.path)).some((n) => n.startsWith("probe-")), "the probe cgroup is gone");
    } finally {
      if (host.exitCode === null) host.kill("SIGKILL");
      killEscapees(nonce);
    }
  });
}
