// ProcessTree against real processes: members found by ppid, by shared session and by the marker
// (a `setsid` child leaves the CLI's session), and SIGKILL reaching all of them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { ProcessTree } from "../../src/runner/process-tree.ts";
import { startTree } from "./_support.ts";

/** Refreshes `tree` every 20 ms (2 s at most) until `done` holds for its members; returns the last. */
async function refreshUntil(tree: ProcessTree, done: (members: number[]) => boolean): Promise<number[]> {
  let members = tree.refresh();
  for (let poll = 0; poll < 100 && !done(members); poll++) {
    await new Promise((r) => setTimeout(r, 20));
    members = tree.refresh();
  }
  return members;
}

test("a tree's members (child, grandchild in its own session) are found and killed", async () => {
  const marker = randomUUID();
  const root = await startTree(marker);
  const tree = new ProcessTree(root.pid!, marker);
  const members = await refreshUntil(tree, (m) => m.length >= 3);
  assert.equal(members.length, 3, `root and both sleepers: ${members.join(",")}`);
  assert.ok(members.includes(root.pid!));

  const exited = new Promise((r) => root.once("exit", r));
  tree.signal("SIGKILL");
  await exited;
  const left = await refreshUntil(tree, (m) => m.length === 0);
  assert.deepEqual(left, [], "nothing of the tree survives");
});
