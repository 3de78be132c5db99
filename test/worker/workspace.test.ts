// The workspace-roots check on real paths: symlinks are resolved on both sides, so a link inside a
// root that points outside is refused and a root reached through a link still admits its folders.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { underRoots } from "../../src/worker/workspace.ts";

test("a cwd is admitted only when its real path lies under a root's real path", () => {
  const base = mkdtempSync(join(tmpdir(), "ts-roots-"));
  try {
    const root = join(base, "root");
    const outside = join(base, "outside");
    mkdirSync(join(root, "project", "sub"), { recursive: true });
    mkdirSync(outside);
    symlinkSync(outside, join(root, "escape"));
    symlinkSync(root, join(base, "root-link"));
    assert.equal(underRoots(root, [root]), true);
    assert.equal(underRoots(join(root, "project", "sub"), [root]), true);
    assert.equal(underRoots(join(root, "escape"), [root]), false, "a link out of the root");
    assert.equal(underRoots(join(root, "project", "..", "..", "outside"), [root]), false);
    assert.equal(underRoots(`${root}-sibling`, [root]), false, "a sibling sharing the root's name as prefix");
    assert.equal(underRoots(join(root, "project"), [join(base, "root-link")]), true, "a root given through a link");
    assert.equal(underRoots(join(base, "root-link", "project"), [root]), true, "a cwd given through a link");
    assert.equal(
      underRoots(join(root, "not-yet-made"), [root]),
      true,
      "a path that does not exist yet is judged as written",
    );
    assert.equal(underRoots("/", [root, outside]), false);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});
