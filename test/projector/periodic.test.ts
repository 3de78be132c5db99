// The projector's periodic tasks: one run at a time, a failed run logged and run again next period,
// and a stop that waits for a run in progress only as long as its bound, then closes the task.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "../../src/kernel/index.ts";
import { startPeriodic } from "../../src/projector/periodic.ts";

function recordingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const record =
    (level: string) =>
    (obj: object | string, msg?: string): void => {
      lines.push(`${level} ${msg ?? ""} ${JSON.stringify(obj)}`);
    };
  return {
    logger: { debug: record("debug"), info: record("info"), warn: record("warn"), error: record("error") },
    lines,
  };
}

test("a failing run is logged and the task runs again; runs never overlap", async () => {
  const { logger, lines } = recordingLogger();
  let runs = 0;
  let inside = 0;
  let overlapped = false;
  let closed = false;
  const periodic = startPeriodic(
    {
      name: "chore",
      everyMs: 20,
      async run() {
        inside++;
        overlapped ||= inside > 1;
        runs++;
        await sleep(30);
        inside--;
        if (runs === 1) throw new Error("the store did not answer");
        return { done: runs };
      },
      close: async () => {
        closed = true;
      },
    },
    logger,
  );
  while (runs < 3) await sleep(10);
  await periodic.stop();
  assert.equal(overlapped, false);
  assert.ok(closed, "the task is closed on stop");
  assert.ok(lines.some((line) => line.startsWith("error chore failed") && line.includes("the store did not answer")));
  assert.ok(lines.some((line) => line.startsWith("info chore ran") && line.includes('"done":2')));
  const settled = runs;
  await sleep(80);
  assert.equal(runs, settled, "nothing runs after the stop");
});

test("a stop waits for a run in progress only as long as its bound", async () => {
  const { logger, lines } = recordingLogger();
  let started = false;
  const periodic = startPeriodic(
    {
      name: "stuck",
      everyMs: 10,
      run: async () => {
        started = true;
        await new Promise(() => undefined);
        return {};
      },
    },
    logger,
    200,
  );
  while (!started) await sleep(5);
  const before = Date.now();
  await periodic.stop();
  const waited = Date.now() - before;
  assert.ok(waited >= 190 && waited < 2000, `waited ${waited} ms`);
  assert.ok(lines.some((line) => line.startsWith("warn stuck still running")));
});
