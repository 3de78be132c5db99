// ProcessTree against real processes: members found by ppid, by shared session and by the marker
// (a `setsid` child leaves the CLI's session), SIGKILL reaching all of them, and the stat files the
// table keeps open being closed once their processes are gone.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { pidMark, pidsSince, ProcessTree } from "../../src/cli/process-tree.ts";
import { startTree } from "./_support.ts";

function openStatPids(): number[] {
  const pids: number[] = [];
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      const statPath = /^\/proc\/(\d+)\/stat$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
      if (statPath !== null) pids.push(Number(statPath[1]));
    } catch {
      // closed while listing
    }
  }
  return pids;
}

/** Refreshes `tree` every 20 ms (2 s at most) until `done` holds for its members; returns the last. */
async function refreshUntil(tree: ProcessTree, done: (members: number[]) => boolean): Promise<number[]> {
  let members = tree.refresh();
  for (let attempt = 0; attempt < 100 && !done(members); attempt++) {
    await new Promise((r) => setTimeout(r, 20));
    members = tree.refresh();
  }
  return members;
}

test("a tree's members (child, grandchild in its own session) are found, killed, and their stat files closed", async () => {
  const marker = randomUUID();
  const root = await startTree(marker);
  const tree = new ProcessTree(root.pid!, marker);
  const members = await refreshUntil(tree, (m) => m.length >= 3);
  assert.equal(members.length, 3, `root and both sleepers: ${members.join(",")}`);
  assert.ok(members.includes(root.pid!));
  const held = openStatPids();
  for (const pid of members) assert.ok(held.includes(pid), `stat of member ${pid} is held open for the next refresh`);

  const exited = new Promise((r) => root.once("exit", r));
  tree.signal("SIGKILL");
  await exited;
  const left = await refreshUntil(tree, (m) => m.length === 0);
  assert.deepEqual(left, [], "nothing of the tree survives");
  // Other processes on the host may exit between that refresh and this check; their files close at
  // the next refresh. The tree's members were seen gone by the last one, so theirs are closed now.
  const open = openStatPids();
  for (const pid of members) assert.ok(!open.includes(pid), `no stat file of a vanished member (${pid}) stays open`);
});

test("with the pid mark taken before the spawn, a refresh reads only the processes started since, and finds the same members", async () => {
  const before = spawn("sleep", ["60"], { stdio: "ignore" });
  try {
    const marker = randomUUID();
    const mark = pidMark();
    assert.ok(
      mark !== undefined && mark.forks > 0 && mark.tasks > 0,
      "this host's /proc gives the fork counter and the task count",
    );
    const root = await startTree(marker);
    const inStretch = pidsSince(root.pid!, mark);
    assert.ok(inStretch !== undefined, "the stretch is bounded");
    const full = new ProcessTree(root.pid!, marker);
    const marked = new ProcessTree(root.pid!, marker, mark);
    const members = await refreshUntil(full, (m) => m.length >= 3);
    assert.equal(members.length, 3);
    assert.deepEqual(marked.refresh().sort(), members.sort(), "the same members as a full scan");
    for (const pid of members) assert.ok(inStretch(pid), `member ${pid} lies in the stretch`);
    assert.equal(inStretch(before.pid!), false, "a process started before the mark is not read");
    assert.equal(inStretch(process.pid), false);
    // A fork counter that moved a whole cycle since the mark: nothing can be ruled out.
    const max = Number(readFileSync("/proc/sys/kernel/pid_max", "latin1"));
    assert.equal(pidsSince(root.pid!, { forks: mark.forks - max, tasks: mark.tasks }), undefined);
    assert.equal(pidsSince(root.pid!, undefined), undefined);
    const exited = new Promise((r) => root.once("exit", r));
    marked.signal("SIGKILL");
    await exited;
    const left = await refreshUntil(full, (m) => m.length === 0);
    assert.deepEqual(left, [], "the marked tree's SIGKILL reached every member");
  } finally {
    before.kill("SIGKILL");
  }
});
