// The git guard of untrusted turns, with the real git: the workspace's .git/config cannot name a
// program git runs by itself, and a turn's GIT_* variables beyond identity do not reach git.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { guardGit } from "../../src/runner/git-guard.ts";

test("guardGit: command-scope config outranks the workspace's; only identity GIT_* names survive", () => {
  const ws = mkdtempSync(join(tmpdir(), "ts-gitguard-"));
  execFileSync("git", ["init", "-q", ws]);
  const planted = {
    "core.fsmonitor": "/ws/evil",
    "core.hooksPath": "/ws/hooks",
    "core.pager": "/ws/pager",
    "core.sshCommand": "/ws/ssh",
    "credential.helper": "/ws/cred",
  };
  for (const [key, value] of Object.entries(planted)) execFileSync("git", ["-C", ws, "config", key, value]);
  const env: Record<string, string> = {
    PATH: process.env["PATH"]!,
    GIT_AUTHOR_NAME: "Job Author",
    GIT_DIR: "/elsewhere/.git",
    GIT_EXTERNAL_DIFF: "/ws/diff",
    GIT_CONFIG_PARAMETERS: "'core.pager'='/ws/pager2'",
  };
  guardGit(env);
  assert.equal(env["GIT_AUTHOR_NAME"], "Job Author");
  for (const name of ["GIT_DIR", "GIT_EXTERNAL_DIFF", "GIT_CONFIG_PARAMETERS"]) {
    assert.equal(env[name], undefined, `${name} removed`);
  }
  const seen = (key: string): string[] =>
    execFileSync("git", ["-C", ws, "config", "--get-all", key], { env, encoding: "utf8" }).split("\n").slice(0, -1);
  assert.deepEqual(seen("core.fsmonitor"), ["/ws/evil", ""], "the workspace's, then the guard's empty one, which wins");
  assert.equal(seen("core.hooksPath").at(-1), "/dev/null");
  assert.equal(seen("core.pager").at(-1), "cat");
  assert.equal(seen("core.sshCommand").at(-1), "ssh");
  assert.equal(seen("credential.helper").at(-1), "", "an empty helper empties the list the files named");
  // What git itself resolves (last value wins) for the planted keys.
  const effective = execFileSync("git", ["-C", ws, "var", "GIT_PAGER"], { env, encoding: "utf8" }).trim();
  assert.equal(effective, "cat");
});
