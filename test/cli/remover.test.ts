// Finished runs' folders are deleted on a thread of their own, at the lowest priority, so a slow
// disk never stalls the worker's main thread.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { removeSoon } from "../../src/cli/remover.ts";

function tree(): string {
  const root = mkdtempSync(join(tmpdir(), "ts-rm-"));
  for (let index = 0; index < 20; index++) {
    mkdirSync(join(root, `d${index}`, "x"), { recursive: true });
    writeFileSync(join(root, `d${index}`, "x", "f.json"), "x".repeat(4096));
  }
  return root;
}

test("removeSoon deletes a tree while the main thread is busy, from a thread at nice 19", async () => {
  const dir = tree();
  const errors: Error[] = [];
  removeSoon(dir, (e) => errors.push(e));
  await new Promise((r) => setImmediate(r)); // the batch goes out
  // Busy on the main thread from here: only another thread can delete the tree meanwhile.
  const until = Date.now() + 10_000;
  while (existsSync(dir) && Date.now() < until) {
    // spin
  }
  assert.equal(existsSync(dir), false, "deleted while the main thread never yielded");
  const nices = readdirSync("/proc/self/task").map((taskId) => {
    const stat = readFileSync(`/proc/self/task/${taskId}/stat`, "utf8");
    return {
      name: readFileSync(`/proc/self/task/${taskId}/comm`, "utf8").trim(),
      nice: Number(stat.slice(stat.lastIndexOf(") ") + 2).split(" ")[16]),
    };
  });
  assert.ok(
    nices.some((t) => t.nice === 19),
    `a thread at nice 19: ${JSON.stringify(nices)}`,
  );
  assert.equal(nices.find((t) => t.name === "MainThread")?.nice, 0, "the main thread keeps its priority");
  assert.deepEqual(errors, []);
});

test("removeSoon batches many paths and leaves the process free to exit once done", async () => {
  const dirs = Array.from({ length: 5 }, tree);
  for (const treeDir of dirs) removeSoon(treeDir, (e) => assert.fail(e.message));
  const until = Date.now() + 10_000;
  while (dirs.some(existsSync) && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(dirs.filter(existsSync), []);
  // The test runner ends this file's process only if nothing holds it open: the idle thread must not.
});
