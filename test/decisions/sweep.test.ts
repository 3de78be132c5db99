// A SIGKILLed worker leaves its supervised-run folders (run file with a token, settings) behind: the
// sweep finds them by the owner named in the folder and removes those whose process is gone.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, symlinkSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { sweepSupervisedDirs, SUPERVISED_DIR_PREFIX } from "../../src/decisions/index.ts";
import { prepare, setup, startHubChild, withHub } from "./_support.ts";

test("sweepSupervisedDirs removes the folders of dead owners (also a reused pid), keeps live ones, never follows a symlink", async () => {
  const ctx = await setup();
  try {
    const { child, runFile } = await startHubChild(ctx);
    const dead = basename(dirname(runFile));
    assert.ok(dead.startsWith(`${SUPERVISED_DIR_PREFIX}${child.pid}.`), `named by its owner: ${dead}`);
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await exited;
    const live = prepare(ctx, await withHub(ctx));
    // This process's pid with another start time: the folder of an earlier process that had the same pid.
    const reused = `${SUPERVISED_DIR_PREFIX}${process.pid}.1-abcdef`;
    mkdirSync(join(ctx.dir, reused));
    // A symlink named like a folder: not a directory of ours, left alone (and its target untouched).
    const target = join(ctx.dir, "precious");
    mkdirSync(target);
    symlinkSync(target, join(ctx.dir, `${SUPERVISED_DIR_PREFIX}999999.1-zzzzzz`));

    const swept = sweepSupervisedDirs({ tmpDir: ctx.dir });
    assert.deepEqual(swept.removed.sort(), [dead, reused].sort());
    assert.deepEqual(swept.live, [basename(dirname(live.runFile))]);
    assert.deepEqual(swept.failed, []);
    assert.equal(existsSync(live.runFile), true);
    assert.equal(existsSync(target), true);
    assert.ok(readdirSync(ctx.dir).includes(`${SUPERVISED_DIR_PREFIX}999999.1-zzzzzz`));
    live.close();
  } finally {
    await ctx.cleanup();
  }
});
