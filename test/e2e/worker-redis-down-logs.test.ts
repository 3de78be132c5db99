// `turnstream worker` with Redis gone for 8 s and then stopped: its stdout holds only pino JSON
// lines, the connection errors among them one per distinct message (no flood), and its stderr holds
// nothing at all (no library's multi-line error dump). Stderr is for a worker that cannot start.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { BIN } from "../bin/_cli.ts";
import { startRedisServer } from "../support/redis-server.ts";
import { NODE, testSpace } from "../worker/_support.ts";

const DOWN_MS = 8000;
// The errors the worker reports for its connections, its BullMQ worker and queue, and the console.
const ERROR_LINES = new Set(["redis connection error", "queue worker error", "queue error"]);

test("worker with Redis down: stdout is JSON lines only, errors not repeated, stderr empty", async () => {
  const redis = await startRedisServer();
  const space = testSpace();
  const child = spawn(NODE, [BIN, "worker"], {
    env: {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      HOME: space.dir("home"),
      REDIS_URL: redis.url,
      TURNSTREAM_WORKSPACE_ROOTS: space.workspace(),
      TURNSTREAM_INSTANCE_ROOT: space.dir("inst"),
      TURNSTREAM_PREFIX: space.logPrefix,
      TURNSTREAM_QUEUE_PREFIX: space.queuePrefix,
      TURNSTREAM_SHUTDOWN_GRACE_MS: "1000",
      LOG_LEVEL: "info",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  try {
    const readyBy = Date.now() + 30_000;
    while (!stdout.includes('"msg":"worker ready"')) {
      assert.ok(Date.now() < readyBy && child.exitCode === null, `worker not ready: ${stdout} ${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await redis.stop();
    await new Promise((r) => setTimeout(r, DOWN_MS));
    child.kill("SIGTERM");
    const code = await Promise.race([
      exited,
      new Promise<string>((r) => setTimeout(() => r("still running"), 40_000).unref()),
    ]);
    assert.equal(code, 0, `exit: ${String(code)}; stderr: ${stderr}`);

    assert.equal(stderr, "", "stderr holds nothing");
    const lines = stdout.split("\n").filter((l) => l !== "");
    const records = lines.map((line) => {
      const record = JSON.parse(line) as Record<string, unknown>;
      assert.ok(
        [10, 20, 30, 40, 50, 60].includes(record["level"] as number) && typeof record["msg"] === "string",
        line,
      );
      return record;
    });
    // The connection errors went through the logger, with the error's code.
    const errors = records.filter((r) => ERROR_LINES.has(r["msg"] as string) || r["source"] === "console");
    assert.ok(
      errors.some(
        (r) => r["msg"] === "redis connection error" && (r["err"] as { code?: string }).code === "ECONNREFUSED",
      ),
      stdout,
    );
    // Said as which Redis and what to check, not in ioredis' words.
    const said = errors
      .filter((r) => r["msg"] === "redis connection error")
      .map((r) => String((r["err"] as { message?: string }).message));
    assert.ok(
      said.every((m) => m.startsWith(`cannot reach Redis at ${redis.url}`) && m.includes("REDIS_URL")),
      said.join("\n"),
    );
    // Within the repeat interval each distinct error is written once, however often it recurs.
    const kinds = errors.map(
      (r) =>
        `${String(r["msg"])}|${String((r["err"] as { message?: string } | undefined)?.message)}|${String(r["connection"])}`,
    );
    assert.equal(new Set(kinds).size, kinds.length, kinds.join("\n"));
    assert.ok(lines.length <= 40, `${lines.length} lines`);
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
    await redis.dispose();
    space.cleanup();
  }
});
