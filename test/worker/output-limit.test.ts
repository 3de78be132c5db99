// A run that prints past the worker's output limits is ended, its process tree killed, and its turn
// fails with errorKind output_limit and a message naming the setting; the log keeps only the lines
// within the limit. The real CLI against the scripted model server: its init line, a tool call and
// a tool result are already more than a tiny limit allows.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { EventObserver } from "../../src/events/index.ts";
import { dataOf, findTreeProcess, rig } from "./_more.ts";

test("past maxOutputLines the run's tree is killed (a background sleep with it) and the turn fails output_limit, naming the option maxOutputLines", async () => {
  // The CLI refuses a foreground `sleep 60` but runs it in the background, and in -p mode waits for
  // it before it exits: without the limit this turn would take a minute.
  const stage = await rig({
    responses: [
      {
        content: [
          {
            type: "tool_use",
            name: "Bash",
            input: { command: "sleep 61", description: "wait", run_in_background: true },
          },
        ],
      },
      { content: [{ type: "tool_use", name: "Bash", input: { command: "echo two", description: "echo" } }] },
      { content: [{ type: "text", text: "never reached" }] },
    ],
  });
  try {
    // Seen from the worker as each line is written: the background sleep runs once its launch's result is printed.
    let sleeper: number | undefined;
    const observer: EventObserver = {
      attempt: () => ({
        onEvent(event) {
          if (
            sleeper === undefined &&
            event.kind === "cli.line" &&
            String((event.data as { raw?: string }).raw).includes('"tool_result"')
          )
            sleeper = findTreeProcess("sleep 61", stage.space.root)?.pid;
        },
      }),
    };
    // init, tool_use, background_tasks_changed, tool_result, tool_use: the echo's result is the sixth line.
    stage.worker({ maxOutputLines: 5, observers: [observer] });
    const started = Date.now();
    const queued = await stage.producer.enqueueTurn({
      prompt: "go",
      cwd: stage.ws,
      options: { allowedTools: ["Bash"] },
    });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 40_000 });
    assert.equal(res.status, "failed", JSON.stringify(res.event.data));
    assert.equal(res.errorKind, "output_limit");
    const error = dataOf(res.event)["error"] as { name: string; message: string };
    assert.equal(error.name, "OutputLimitExceeded");
    assert.match(error.message, /more than 5 lines.*option maxOutputLines/);
    assert.equal(dataOf(res.event)["retryable"], false);
    assert.ok(Date.now() - started < 30_000, "the run was ended, not waited out");
    const events = await stage.events(queued.session, queued.turn);
    assert.ok(events.filter((e) => e.kind === "cli.line").length <= 5, "lines past the limit are not written");
    assert.ok(events.some((e) => e.kind === "cli.exit"));
    assert.ok(sleeper !== undefined, "the background sleep was running when the limit was hit");
    assert.equal(
      findTreeProcess("sleep 61", stage.space.root),
      undefined,
      "the background sleep is gone with the tree",
    );
  } finally {
    await stage.dispose();
  }
});

test("past maxOutputBytes (a large tool result) the turn fails output_limit, naming the option maxOutputBytes", async () => {
  const stage = await rig({
    responses: [
      {
        content: [
          {
            type: "tool_use",
            name: "Bash",
            input: { command: "head -c 40000 /dev/zero | tr '\\0' a", description: "print a lot" },
          },
        ],
      },
      { content: [{ type: "text", text: "printed" }] },
    ],
  });
  try {
    stage.worker({ maxOutputBytes: 16 * 1024 });
    const queued = await stage.producer.enqueueTurn({
      prompt: "go",
      cwd: stage.ws,
      options: { allowedTools: ["Bash"] },
    });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 40_000 });
    assert.equal(res.status, "failed", JSON.stringify(res.event.data));
    assert.equal(res.errorKind, "output_limit");
    assert.match(
      (dataOf(res.event)["error"] as { message: string }).message,
      /more than 16384 bytes.*option maxOutputBytes/,
    );
    const written = (await stage.events(queued.session, queued.turn))
      .filter((e) => e.kind === "cli.line")
      .reduce((n, e) => n + String(dataOf(e)["raw"]).length, 0);
    assert.ok(written <= 16 * 1024, `${written} bytes of lines written`);
  } finally {
    await stage.dispose();
  }
});
