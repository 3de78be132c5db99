// `turnstream run --limit` against a worker process whose maximums come from its environment
// (TURNSTREAM_MAX_*): a job asking for more is refused by the worker, naming the option and the
// variable (usage, exit 2); a bad --limit flag is refused before anything is enqueued.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { startModelServer } from "../../src/testing/index.ts";
import { createEventLog } from "../../src/log/index.ts";
import { cleanupKeys, cliEnv, NODE, readAll, redisFor, startWorkerProcess, testSpace } from "../worker/_support.ts";

const exec = promisify(execFile);
const BIN = join(process.cwd(), "src", "bin", "turnstream.ts");

async function turnstream(args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  try {
    const succeeded = await exec(NODE, [BIN, ...args], {
      env: { ...process.env, NO_COLOR: "1", ...env },
      timeout: 120_000,
    });
    return { code: 0, out: succeeded.stdout + succeeded.stderr };
  } catch (err) {
    const failure = err as { code?: number; stdout?: string; stderr?: string };
    return {
      code: typeof failure.code === "number" ? failure.code : -1,
      out: (failure.stdout ?? "") + (failure.stderr ?? ""),
    };
  }
}

test("run --limit: above the worker's TURNSTREAM_MAX_MEMORY_MB is refused by name (exit 2); within it the turn runs", async () => {
  const space = testSpace();
  const server = await startModelServer({ script: { responses: [{ content: [{ type: "text", text: "bounded" }] }] } });
  const ws = space.workspace();
  const common = { TURNSTREAM_PREFIX: space.logPrefix, TURNSTREAM_QUEUE_PREFIX: space.queuePrefix };
  const worker = await startWorkerProcess({
    ...cliEnv(server.url),
    ...common,
    TURNSTREAM_WORKSPACE_ROOTS: ws,
    TURNSTREAM_INSTANCE_ROOT: space.dir("root"),
    TURNSTREAM_MAX_MEMORY_MB: "256",
  });
  const redis = redisFor();
  try {
    const above = await turnstream(
      ["run", "--wait", "--json", "--cwd", ws, "--limit", "memoryMb=1024", "--", "hi"],
      common,
    );
    assert.equal(above.code, 2, above.out);
    const said = JSON.parse(above.out.slice(0, above.out.indexOf("\n"))) as {
      errorKind: string;
      session: string;
      turn: string;
    };
    assert.equal(said.errorKind, "bad_options");
    const failed = (await readAll(createEventLog({ redis, prefix: space.logPrefix }), said.session)).find(
      (e) => e.kind === "turn.failed",
    );
    const error = (failed?.data as { error: { name: string; message: string } }).error;
    assert.equal(error.name, "LimitAboveMaximum");
    assert.match(
      error.message,
      /options\.limits\.memoryMb: 1024 MiB is above this worker's maximum of 256 MiB \(TURNSTREAM_MAX_MEMORY_MB\)/,
    );

    const within = await turnstream(
      ["run", "--wait", "--cwd", ws, "--limit", "memoryMb=200", "--limit", "pids=100", "--", "hi"],
      common,
    );
    assert.equal(within.code, 0, within.out);
    assert.match(within.out, /bounded/);

    const bad = await turnstream(["run", "--cwd", ws, "--limit", "nofile=10", "--", "hi"], common);
    assert.equal(bad.code, 2);
    assert.match(bad.out, /--limit takes name=N with name one of pids, memoryMb, cpus, scratchMb, got 'nofile=10'/);
  } finally {
    worker.kill("SIGTERM");
    await worker.exited;
    await cleanupKeys(redis, space);
    redis.disconnect();
    await server.close();
    space.cleanup();
  }
});
