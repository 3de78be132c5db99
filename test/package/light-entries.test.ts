// "turnstream/runner" is for running a turn in-process without the fleet: importing it must not load
// the queue, the Redis client, the tracing SDK or the logger (each costs start-up time and memory).
// Each entry is imported in a fresh Node process whose module hooks record every module resolved,
// so a static import chain into a heavy package, however indirect, fails here.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { distDir, ensureBuilt, repoRoot } from "../support/build.ts";

const run = promisify(execFile);

/** Imports the module at argv[1] and prints the URL of every module resolved while loading it, as JSON. */
const RECORDER = `
import { registerHooks } from "node:module";
const resolved = new Set();
registerHooks({
  resolve(specifier, context, nextResolve) {
    const result = nextResolve(specifier, context);
    resolved.add(result.url);
    return result;
  },
});
await import(process.argv[1]);
process.stdout.write(JSON.stringify([...resolved]));
`;

/** The only packages the light entries may load. */
const LIGHT_ENTRY_PACKAGES = ["zod"];
/** What the runner must never load; named so a failure says what crept in. */
const HEAVY = /^(bullmq|ioredis|pino|@opentelemetry\/.+)$/;

/** "zod" for …/node_modules/zod/v4/index.js, "@opentelemetry/api" for a scoped package. */
function packageOf(url: string): string | undefined {
  const at = url.lastIndexOf("/node_modules/");
  if (at < 0) return undefined;
  const parts = url.slice(at + "/node_modules/".length).split("/");
  return parts[0]!.startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0];
}

/** The packages a fresh process loads to import `file`. */
async function packagesLoadedBy(file: string): Promise<string[]> {
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", RECORDER, pathToFileURL(file).href], {
    cwd: repoRoot,
  });
  const urls = JSON.parse(stdout) as string[];
  return [...new Set(urls.map(packageOf).filter((name) => name !== undefined))].sort();
}

ensureBuilt();

for (const entry of ["runner", "protocol", "events", "testing"]) {
  for (const [form, file] of [
    ["built", join(distDir, "entries", `${entry}.js`)],
    ["source", join(repoRoot, "src", "entries", `${entry}.ts`)],
  ] as const) {
    test(`importing "turnstream/${entry}" (${form}) loads no queue, Redis, tracing or logger package`, async () => {
      const loaded = await packagesLoadedBy(file);
      assert.deepEqual(
        loaded.filter((name) => HEAVY.test(name)),
        [],
      );
      assert.deepEqual(
        loaded.filter((name) => !LIGHT_ENTRY_PACKAGES.includes(name)),
        [],
        "a package beyond the light entries' allow-list is loaded at import",
      );
    });
  }
}

test("the recorder sees heavy packages where they are imported: the root entry loads them", async () => {
  const loaded = await packagesLoadedBy(join(distDir, "index.js"));
  for (const name of ["bullmq", "ioredis", "@opentelemetry/api"]) assert.ok(loaded.includes(name), `${name} not seen`);
});
