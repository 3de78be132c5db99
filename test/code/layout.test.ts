// The layout table in docs/ARCHITECTURE.md is the rule for imports between src/ folders: every
// relative import of a file in one folder reaches only folders that folder's row lists. So the table
// cannot drift from the code, and no change adds an import the design does not allow without
// changing the table in the same commit.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { repoRoot } from "../support/build.ts";

const src = join(repoRoot, "src");

/** folder → the folders its row allows (undefined: any). */
function allowedImports(): Map<string, Set<string> | undefined> {
  const doc = readFileSync(join(repoRoot, "docs", "ARCHITECTURE.md"), "utf8");
  const rows = new Map<string, Set<string> | undefined>();
  for (const m of doc.matchAll(/^\| `src\/([a-z-]+)` \| [^|]+ \| ([^|]+) \|$/gm)) {
    const list = m[2]!.trim();
    if (list === "any") rows.set(m[1]!, undefined);
    else if (list.startsWith("nothing")) rows.set(m[1]!, new Set());
    else rows.set(m[1]!, new Set(list.split(",").map((item) => item.trim().split(/\s+/)[0]!)));
  }
  return rows;
}

function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/^(?:import|export)\s[^;]*?from\s+"(\.[^"]+)"/gms)].map((m) => m[1]!);
}

test("imports between src/ folders follow the layout table in docs/ARCHITECTURE.md", () => {
  const allowed = allowedImports();
  const folders = readdirSync(src, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name);
  assert.deepEqual(
    folders.filter((f) => !allowed.has(f)),
    [],
    "every src/ folder has a row in the layout table",
  );
  const wrong: string[] = [];
  for (const folder of folders) {
    const may = allowed.get(folder);
    if (may === undefined) continue;
    for (const entry of readdirSync(join(src, folder), { withFileTypes: true, recursive: true })) {
      if (!entry.isFile() || !/\.(ts|mjs)$/.test(entry.name)) continue;
      const file = join(entry.parentPath, entry.name);
      for (const spec of importsOf(file)) {
        const target = relative(src, resolve(dirname(file), spec)).split("/")[0]!;
        if (target !== folder && !target.startsWith("..") && !may.has(target))
          wrong.push(`${relative(repoRoot, file)} imports ${spec}`);
      }
    }
  }
  assert.deepEqual(wrong, []);
});
