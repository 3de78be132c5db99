// A worker's per-run limits: its maximums from the environment (defaults, 0 for off, a malformed
// value refused by name), a job that asks for more than a maximum refused by name at the worker
// (the producer cannot know the worker's maximums), a job that asks for less getting less, and a
// real turn past the worker's process limit failing limit_pids once, not retried.
import { test } from "node:test";
import assert from "node:assert/strict";
import { workerConfigFromEnv, WorkerConfigError } from "../../src/worker/config.ts";
import { compileWorkerOptions } from "../../src/worker/options.ts";
import { compileRunLimits, DEFAULT_RUN_LIMITS, jobLimitsRefusal, runLimitsFor } from "../../src/worker/limits.ts";
import { turnOptionsSchema } from "../../src/queue/schema.ts";
import { dataOf, findTreeProcess, rig } from "./_more.ts";

const MiB = 1024 * 1024;
const base = { TURNSTREAM_WORKSPACE_ROOTS: "/tmp" };

test("TURNSTREAM_MAX_*: bounded by default, set by the environment, 0 turns one off, a malformed one refused by name", () => {
  const byDefault = compileWorkerOptions(workerConfigFromEnv(base)).limits;
  assert.deepEqual(byDefault, {
    pids: 512,
    memoryBytes: 4096 * MiB,
    cpus: undefined,
    scratchBytes: 1024 * MiB,
    turnMs: 3_600_000,
  });
  const env = {
    ...base,
    TURNSTREAM_MAX_PIDS: "64",
    TURNSTREAM_MAX_MEMORY_MB: "0",
    TURNSTREAM_MAX_CPUS: "1.5",
    TURNSTREAM_MAX_SCRATCH_MB: "32",
    TURNSTREAM_MAX_TURN_MS: "60000",
  };
  const set = compileWorkerOptions(workerConfigFromEnv(env)).limits;
  assert.deepEqual(set, { pids: 64, memoryBytes: undefined, cpus: 1.5, scratchBytes: 32 * MiB, turnMs: 60_000 });
  const malformed = [
    ["TURNSTREAM_MAX_PIDS", "-1"],
    ["TURNSTREAM_MAX_MEMORY_MB", "1.5"],
    ["TURNSTREAM_MAX_CPUS", "two"],
    ["TURNSTREAM_MAX_TURN_MS", "1h"],
  ] as const;
  for (const [variable, bad] of malformed) {
    const named = (err: unknown): boolean => err instanceof WorkerConfigError && err.variable === variable;
    assert.throws(() => workerConfigFromEnv({ ...base, [variable]: bad }), named, variable);
  }
  assert.throws(() => compileRunLimits({ pids: 1.5 }), /limits\.pids/);
  assert.deepEqual(compileRunLimits(undefined), DEFAULT_RUN_LIMITS);
});

test("a job may lower each limit, never raise it: more is refused naming the option and the worker's maximum", () => {
  const max = compileRunLimits({ pids: 100, memoryBytes: 512 * MiB, cpus: 2, scratchBytes: 64 * MiB, turnMs: 60_000 });
  assert.equal(
    jobLimitsRefusal({ limits: { pids: 100, memoryMb: 512, cpus: 2, scratchMb: 64 }, timeoutMs: 60_000 }, max),
    undefined,
    "the maximum itself is allowed",
  );
  const cases = [
    [
      { limits: { pids: 101 } },
      /^options\.limits\.pids: 101 tasks is above this worker's maximum of 100 tasks \(TURNSTREAM_MAX_PIDS\)/,
    ],
    [
      { limits: { memoryMb: 4096 } },
      /^options\.limits\.memoryMb: 4096 MiB is above .* 512 MiB \(TURNSTREAM_MAX_MEMORY_MB\)/,
    ],
    [{ limits: { cpus: 8 } }, /^options\.limits\.cpus: 8 CPUs .* 2 CPUs \(TURNSTREAM_MAX_CPUS\)/],
    [{ limits: { scratchMb: 65 } }, /^options\.limits\.scratchMb: 65 MiB .* 64 MiB \(TURNSTREAM_MAX_SCRATCH_MB\)/],
    [{ timeoutMs: 3_600_000 }, /^options\.timeoutMs: 3600000 ms .* 60000 ms \(TURNSTREAM_MAX_TURN_MS\)/],
  ] as const;
  for (const [options, message] of cases) {
    const refused = jobLimitsRefusal(options, max);
    assert.equal(refused?.name, "LimitAboveMaximum");
    assert.match(refused.message, message);
  }
  // A limit the worker turned off is the job's to set.
  assert.equal(jobLimitsRefusal({ limits: { memoryMb: 1 << 20 } }, { ...max, memoryBytes: undefined }), undefined);
  assert.deepEqual(runLimitsFor({ limits: { pids: 10, scratchMb: 8 }, timeoutMs: 5000 }, max), {
    pids: 10,
    memoryBytes: 512 * MiB,
    cpus: 2,
    scratchBytes: 8 * MiB,
    // The job's timeoutMs stays its own (retried) deadline; the worker's maximum is the ceiling.
    durationMs: 60_000,
  });
});

test("the job schema refuses a limit that is not a positive number, and any limit it does not know", () => {
  for (const limits of [{ pids: 0 }, { memoryMb: -1 }, { cpus: 0 }, { scratchMb: 1.5 }, { pids: 5, nofile: 3 }]) {
    const parsed = turnOptionsSchema.safeParse({ limits });
    assert.equal(parsed.success, false, JSON.stringify(limits));
  }
  assert.equal(
    turnOptionsSchema.safeParse({ limits: { pids: 5, memoryMb: 64, cpus: 0.5, scratchMb: 16 } }).success,
    true,
  );
});

test("a job asking for more memory than the worker allows fails bad_options before any CLI starts", async () => {
  const stage = await rig({ responses: [{ content: [{ type: "text", text: "never" }] }] });
  try {
    stage.worker({ limits: { memoryBytes: 256 * MiB } });
    const queued = await stage.producer.enqueueTurn({
      prompt: "go",
      cwd: stage.ws,
      options: { limits: { memoryMb: 1024 } },
    });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 30_000 });
    assert.equal(res.status, "failed");
    assert.equal(res.errorKind, "bad_options");
    const error = dataOf(res.event)["error"] as { name: string; message: string };
    assert.equal(error.name, "LimitAboveMaximum");
    assert.match(
      error.message,
      /options\.limits\.memoryMb: 1024 MiB is above this worker's maximum of 256 MiB \(TURNSTREAM_MAX_MEMORY_MB\)/,
    );
    assert.equal(stage.server.requests().length, 0, "no CLI asked the model anything");
  } finally {
    await stage.dispose();
  }
});

test("a turn whose Bash tool forks past the worker's process limit fails limit_pids on its first attempt, its tree gone", async () => {
  const stage = await rig({
    responses: [
      {
        content: [
          {
            type: "tool_use",
            name: "Bash",
            input: { command: `for i in $(seq 80); do sh -c "sleep 299.5" & done; wait`, description: "fork" },
          },
        ],
      },
      { content: [{ type: "text", text: "never reached" }] },
    ],
  });
  try {
    stage.worker({ limits: { pids: 40 } });
    const queued = await stage.producer.enqueueTurn({
      prompt: "go",
      cwd: stage.ws,
      options: { allowedTools: ["Bash"] },
    });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 });
    assert.equal(res.status, "failed", JSON.stringify(res.event.data));
    assert.equal(res.errorKind, "limit_pids");
    assert.equal(dataOf(res.event)["retryable"], false);
    assert.equal(dataOf(res.event)["attempt"], 1, "not retried");
    assert.match((dataOf(res.event)["error"] as { message: string }).message, /limit of 40 tasks/);
    assert.equal(findTreeProcess("sleep 299.5", stage.space.root), undefined, "no sleep of the turn is left");
  } finally {
    await stage.dispose();
  }
});
