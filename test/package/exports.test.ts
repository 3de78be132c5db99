// The public API is a checked-in list: a name that appears in an entry point without being added to
// test/package/exports.json is a leak, a listed name that disappears breaks users. Every exported
// function and every option of an exported `…Options` interface says what it is for.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../support/build.ts";
import { ENTRY_POINTS, publicApi, type EntryReport } from "./_api.ts";

const listed = JSON.parse(readFileSync(join(repoRoot, "test", "package", "exports.json"), "utf8")) as Record<
  string,
  string[]
>;
const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { exports: Record<string, unknown> };
let api: Record<string, EntryReport> | undefined;
const apiOnce = (): Record<string, EntryReport> => (api ??= publicApi());

test("package.json exports exactly the listed entry points (and package.json)", () => {
  assert.deepEqual(Object.keys(pkg.exports).sort(), [...Object.keys(listed), "./package.json"].sort());
  assert.deepEqual(Object.keys(ENTRY_POINTS).sort(), Object.keys(listed).sort());
});

test("every subpath but the root is built from src/entries/, and the root re-exports the audiences' entries", () => {
  for (const [subpath, file] of Object.entries(ENTRY_POINTS)) {
    assert.equal(file, subpath === "." ? "src/index.ts" : `src/entries/${subpath.slice(2)}.ts`);
  }
  const audiences = ["./runner", "./producer", "./worker", "./log"];
  const union = [...new Set(audiences.flatMap((subpath) => listed[subpath]!))].sort();
  assert.deepEqual(union, [...listed["."]!].sort(), "the root exports the union of the audiences' entries");
});

for (const subpath of Object.keys(ENTRY_POINTS)) {
  test(`"turnstream${subpath.slice(1)}" exports exactly the names in exports.json`, () => {
    const names = apiOnce()[subpath]!.names;
    const leaked = names.filter((n) => !listed[subpath]!.includes(n));
    const missing = listed[subpath]!.filter((n) => !names.includes(n));
    assert.deepEqual(
      { leaked, missing },
      { leaked: [], missing: [] },
      "add a new public name to test/package/exports.json, or stop exporting it",
    );
  });

  test(`"turnstream${subpath.slice(1)}": every exported function and option has a doc comment`, () => {
    const surface = apiOnce()[subpath]!;
    assert.deepEqual(
      { functions: surface.undocumentedFunctions, options: surface.undocumentedOptions },
      { functions: [], options: [] },
    );
  });
}
