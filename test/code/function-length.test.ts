// Small units with one job: no function in src/ runs past LIMIT lines unless the comment right above
// it says why it must (`long-function: <reason>`). Functions are found by parsing the sources (types
// stripped, positions kept), so arrow functions and methods count like declarations.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { stripTypeScriptTypes } from "node:module";
import { join, relative } from "node:path";
import { parse, type Node } from "acorn";
import { fullAncestor } from "acorn-walk";
import { repoRoot } from "../support/build.ts";

const LIMIT = 80;
const REASON = /long-function: \S/;

interface Found {
  where: string;
  lines: number;
  justified: boolean;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .map((e) => join(e.parentPath, e.name));
}

/** The comment lines directly above `line` (1-based), up to the first line that is not a comment. */
function commentAbove(lines: string[], line: number): string {
  const out: string[] = [];
  for (let index = line - 2; index >= 0; index--) {
    const text = lines[index]!.trim();
    if (!(text.startsWith("//") || text.startsWith("*") || text.startsWith("/*"))) break;
    out.push(text);
  }
  return out.join("\n");
}

function longFunctions(file: string): Found[] {
  const text = readFileSync(file, "utf8");
  const lines = text.split("\n");
  const ast = parse(stripTypeScriptTypes(text, { mode: "strip" }), {
    ecmaVersion: "latest",
    sourceType: "module",
    locations: true,
  });
  const found: Found[] = [];
  fullAncestor(ast, (node: Node) => {
    if (!/Function/.test(node.type) || node.loc == null) return;
    const length = node.loc.end.line - node.loc.start.line + 1;
    if (length <= LIMIT) return;
    // The comment goes above the line the function starts on (`function f`, `const f = () =>`, a method).
    const justified = REASON.test(commentAbove(lines, node.loc.start.line));
    found.push({ where: `${relative(repoRoot, file)}:${node.loc.start.line}`, lines: length, justified });
  });
  return found;
}

test(`no function in src/ is over ${LIMIT} lines unless a comment above it says why (long-function: …)`, () => {
  const long = sourceFiles(join(repoRoot, "src")).flatMap(longFunctions);
  const unexplained = long.filter((f) => !f.justified).map((f) => `${f.where} (${f.lines} lines)`);
  assert.deepEqual(unexplained, [], "split these, or say above each why it must stay whole");
});
