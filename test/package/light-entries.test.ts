// "turnstream/runner" is for running a turn in-process without the fleet: importing it must not load
// the queue, the Redis client, the tracing SDK or the logger (each costs start-up time and memory);
// the protocol, events and testing entries neither, and the log entry only the Redis client.
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

/** Packages that cost an entry most of its start-up: the queue, the Redis client, the logger, tracing. */
const HEAVY = /^(bullmq|ioredis|pino|@opentelemetry\/.+)$/;

interface Weight {
  /** Heavy packages the entry needs (the log entry talks to Redis). */
  heavyAllowed: readonly string[];
  /** Every package the entry may load, when it is held to a list; a new dependency has to be added here. */
  only?: readonly string[];
}

// lru-cache (the kernel's bounded maps) is a small package with no dependencies of its own.
const LIGHT_ENTRIES: Record<string, Weight> = {
  runner: { heavyAllowed: [], only: ["zod", "lru-cache"] },
  protocol: { heavyAllowed: [], only: ["zod", "lru-cache"] },
  events: { heavyAllowed: [], only: ["zod"] },
  testing: { heavyAllowed: [], only: ["zod", "lru-cache"] },
  log: { heavyAllowed: ["ioredis"] },
};

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

for (const [entry, weight] of Object.entries(LIGHT_ENTRIES)) {
  const forms: [string, string][] = [["built", join(distDir, "entries", `${entry}.js`)]];
  // Tests and development import the sources, through the same chain; the runner is checked there too.
  if (entry === "runner") forms.push(["source", join(repoRoot, "src", "entries", `${entry}.ts`)]);
  for (const [form, file] of forms) {
    test(`importing "turnstream/${entry}" (${form}) loads no heavy package it does not need`, async () => {
      const loaded = await packagesLoadedBy(file);
      const heavy = loaded.filter((name) => HEAVY.test(name) && !weight.heavyAllowed.includes(name));
      assert.deepEqual(heavy, [], "a heavy package is loaded at import: find the static import chain and cut it");
      if (weight.only !== undefined) {
        const beyond = loaded.filter((name) => !weight.only!.includes(name));
        assert.deepEqual(beyond, [], `turnstream/${entry} loads a package beyond its list`);
      }
    });
  }
}

test("the recorder sees heavy packages where they are imported: the root entry loads them", async () => {
  const loaded = await packagesLoadedBy(join(distDir, "index.js"));
  for (const name of ["bullmq", "ioredis", "@opentelemetry/api"]) assert.ok(loaded.includes(name), `${name} not seen`);
});
