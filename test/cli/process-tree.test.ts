// ProcessTree against real processes: members found by ppid, by shared session and by the marker
// (a `setsid` child leaves the CLI's session), SIGKILL reaching all of them, and the stat files the
// table keeps open being closed once their processes are gone.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readdirSync, readlinkSync } from "node:fs";
import { ProcessTree, TREE_MARKER_VAR } from "../../src/cli/process-tree.ts";

function openStatPids(): number[] {
  const pids: number[] = [];
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      const m = /^\/proc\/(\d+)\/stat$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
      if (m !== null) pids.push(Number(m[1]));
    } catch {
      // closed while listing
    }
  }
  return pids;
}

test("a tree's members (child, grandchild in its own session) are found, killed, and their stat files closed", async () => {
  const marker = randomUUID();
  const root = spawn("sh", ["-c", "sleep 60 & setsid sleep 60 & echo started; wait"], {
    detached: true,
    stdio: ["ignore", "pipe", "ignore"],
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", [TREE_MARKER_VAR]: marker },
  });
  await new Promise<void>((resolve) => root.stdout!.once("data", () => resolve()));
  const tree = new ProcessTree(root.pid!, marker);
  let members: number[] = [];
  for (let i = 0; i < 100 && members.length < 3; i++) {
    members = tree.refresh();
    if (members.length < 3) await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(members.length, 3, `root and both sleepers: ${members.join(",")}`);
  assert.ok(members.includes(root.pid!));
  const held = openStatPids();
  for (const pid of members) assert.ok(held.includes(pid), `stat of member ${pid} is held open for the next refresh`);

  const exited = new Promise((r) => root.once("exit", r));
  tree.signal("SIGKILL");
  await exited;
  let left = members;
  for (let i = 0; i < 100 && left.length > 0; i++) {
    left = tree.refresh();
    if (left.length > 0) await new Promise((r) => setTimeout(r, 20));
  }
  assert.deepEqual(left, [], "nothing of the tree survives");
  const listed = new Set(readdirSync("/proc").filter((n) => /^\d+$/.test(n)).map(Number));
  for (const pid of openStatPids()) assert.ok(listed.has(pid), `no stat file of a vanished process (${pid}) stays open`);
});
