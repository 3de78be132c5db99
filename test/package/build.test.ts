// The build: every file the code opens beside itself (`new URL("./…", import.meta.url)`) is in
// dist/ where the built module looks for it, and the built entry points load with type stripping off.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { promisify } from "node:util";
import { distDir, ensureBuilt, repoRoot } from "../support/build.ts";

const run = promisify(execFile);
const src = join(repoRoot, "src");
ensureBuilt();

const sources = readdirSync(src, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts"));

test("every file a module opens beside itself is beside its built module", () => {
  let seen = 0;
  for (const file of sources) {
    for (const match of readFileSync(join(src, file), "utf8").matchAll(/new URL\("(\.[^"]+)", import\.meta\.url\)/g)) {
      const target = resolve(dirname(join(src, file)), match[1]!);
      // package.json sits outside src/ and dist/ alike, two levels up from either.
      const built = target.startsWith(src) ? join(distDir, relative(src, target)) : target;
      assert.ok(existsSync(built), `${file} opens ${match[1]}, missing at ${relative(repoRoot, built)}`);
      seen++;
    }
  }
  assert.ok(seen >= 4);
});

test("the built entry points and command load without type stripping", async () => {
  const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
    exports: Record<string, string | { default: string }>;
  };
  const entries = Object.values(pkg.exports).flatMap((target) => (typeof target === "string" ? [] : [target.default]));
  assert.ok(entries.length >= 8);
  for (const entry of entries) {
    await run(process.execPath, [
      "--no-experimental-strip-types",
      "--input-type=module",
      "-e",
      `await import(${JSON.stringify(join(repoRoot, entry))})`,
    ]);
  }
  const { stdout } = await run(process.execPath, [
    "--no-experimental-strip-types",
    join(distDir, "bin", "turnstream.js"),
    "--help",
  ]);
  assert.match(stdout, /healthcheck/);
});
