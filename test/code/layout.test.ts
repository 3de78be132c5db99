// The layout table in docs/ARCHITECTURE.md is the rule for imports between src/ folders: every
// relative import of a file in one folder reaches only folders that folder's row lists. So the table
// cannot drift from the code, and no change adds an import the design does not allow without
// changing the table in the same commit. Inside src/worker no files import one another in a loop, so
// each step of an attempt can be read (and changed) without the others.
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
  for (const match of doc.matchAll(/^\| `src\/([a-z-]+)` \| [^|]+ \| ([^|]+) \|$/gm)) {
    const list = match[2]!.trim();
    if (list === "any") rows.set(match[1]!, undefined);
    else if (list.startsWith("nothing")) rows.set(match[1]!, new Set());
    else rows.set(match[1]!, new Set(list.split(",").map((item) => item.trim().split(/\s+/)[0]!)));
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

/** Files of `folder` (not its subfolders) that import one another in a loop, one list per loop. */
function importCycles(folder: string): string[][] {
  const dir = join(src, folder);
  const files = readdirSync(dir).filter((name) => /\.(ts|mjs)$/.test(name));
  const imports = new Map<string, string[]>();
  for (const name of files) {
    const targets = importsOf(join(dir, name)).map((spec) => relative(dir, resolve(dir, spec)));
    imports.set(
      name,
      targets.filter((target) => files.includes(target)),
    );
  }
  // Tarjan's strongly connected components: every component of more than one file is a loop.
  const index = new Map<string, number>();
  const lowest = new Map<string, number>();
  const stack: string[] = [];
  const cycles: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    lowest.set(file, index.get(file)!);
    stack.push(file);
    for (const next of imports.get(file)!) {
      if (!index.has(next)) {
        visit(next);
        lowest.set(file, Math.min(lowest.get(file)!, lowest.get(next)!));
      } else if (stack.includes(next)) lowest.set(file, Math.min(lowest.get(file)!, index.get(next)!));
    }
    if (lowest.get(file) !== index.get(file)) return;
    const component = stack.splice(stack.indexOf(file));
    if (component.length > 1) cycles.push(component.sort());
  };
  for (const file of files) if (!index.has(file)) visit(file);
  return cycles;
}

test("the worker's files import one another without a loop, type imports included", () => {
  assert.deepEqual(importCycles("worker"), []);
});
