// What the model sends reaches an operator's terminal escaped, with the real CLI: a scripted model
// answers with text and a Bash call whose description carry terminal escapes (clear line, carriage
// return, cursor up, colour) and a bidi override. `replay --format text` and `tail` print them as
// visible escapes, and so does `run --wait` following a turn; no control or bidi character reaches the
// terminal.
import { test } from "node:test";
import assert from "node:assert/strict";
import { rig } from "../worker/_more.ts";
import { turnstream } from "../bin/_cli.ts";

const TIMEOUT = 120_000;
const HOSTILE_DESCRIPTION = "list files\u001b[2K\r\u001b[1A\u001b[32mall good";
const HOSTILE_TEXT = "Done.\u001b]0;owned\u0007 Result: \u202egnp.exe\u202c ok\r\u001b[2K";
/** What a terminal obeys or reorders: C0 but newline, DEL, C1, bidi controls. */
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069\u061c]/;

test(
  "replay --format text and tail show a model's escapes and bidi characters as visible text",
  { timeout: 180_000 },
  async () => {
    const setup = await rig({
      responses: [
        {
          content: [
            { type: "tool_use", name: "Bash", input: { command: "echo listed", description: HOSTILE_DESCRIPTION } },
          ],
        },
        { content: [{ type: "text", text: HOSTILE_TEXT }] },
        { content: [{ type: "text", text: HOSTILE_TEXT }] },
      ],
    });
    try {
      setup.worker({ sandboxed: true, retry: { maxAttempts: 1 } });
      const queued = await setup.producer.enqueueTurn({
        prompt: "list",
        cwd: setup.ws,
        options: { skipPermissions: true },
      });
      assert.equal(
        (await setup.producer.waitForTurn(queued.turn, { session: queued.session, timeoutMs: TIMEOUT })).status,
        "finished",
      );
      const prefix = ["--prefix", setup.space.logPrefix];

      const replay = await turnstream(["replay", queued.session, "--format", "text", ...prefix]);
      assert.equal(replay.code, 0, replay.stderr);
      assert.doesNotMatch(replay.stdout, RAW, "no raw control or bidi character in the transcript");
      assert.ok(
        replay.stdout.includes("\\x1b]0;owned\\x07 Result: \\u202egnp.exe\\u202c ok\\r\\x1b[2K"),
        replay.stdout,
      );
      assert.match(replay.stdout, /echo listed/);

      const tail = await turnstream(["tail", queued.session, ...prefix]);
      assert.equal(tail.code, 0, tail.stderr);
      assert.doesNotMatch(tail.stdout, RAW, "no raw control or bidi character in the event summaries");
      assert.ok(tail.stdout.includes("\\u202e") || tail.stdout.includes("\\x1b"), tail.stdout);

      // A turn followed live: its transcript and result text are escaped too.
      const live = await turnstream(
        ["run", "--wait", "--cwd", setup.ws, ...prefix, "--queue-prefix", setup.space.queuePrefix, "--", "say it"],
        {},
        TIMEOUT,
      );
      assert.equal(live.code, 0, live.stdout + live.stderr);
      assert.doesNotMatch(live.stdout, RAW, "no raw control or bidi character while following a turn");
      assert.match(live.stdout, /result \(finished\): Done\.\\x1b\]0;owned\\x07 Result: \\u202egnp\.exe/);
    } finally {
      await setup.dispose();
    }
  },
);
