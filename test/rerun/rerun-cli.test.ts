// Record and re-run with the real CLI: a multi-tool turn recorded through the worker re-runs in a copy
// of its workspace as a match (exit 0); after a file the turn reads changes, the re-run differs at that
// tool result (exit 1) and the scripted server says where the runs parted; a three-turn session
// re-runs turn by turn; a recorded API error re-runs as the same error kind.
import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { rig, type Rig } from "../worker/_more.ts";
import { onlyJson, turnstream } from "../bin/_cli.ts";

const TIMEOUT = 120_000;

async function record(testRig: Rig, prompts: string[]): Promise<string> {
  testRig.worker({ sandboxed: true, retry: { maxAttempts: 1 } });
  let session: string | undefined;
  for (const prompt of prompts) {
    const queued = await testRig.producer.enqueueTurn({
      session,
      prompt,
      cwd: testRig.ws,
      options: { skipPermissions: true },
    });
    session = queued.session;
    await testRig.producer.waitForTurn(queued.turn, { session, timeoutMs: TIMEOUT });
  }
  return session!;
}

/** The turns were recorded with permissions skipped: the operator grants that mode, the recording never does. */
const rerun = (testRig: Rig, args: string[]) =>
  turnstream(
    ["rerun", ...args, "--permission-mode", "bypassPermissions", "--prefix", testRig.space.logPrefix, "--json"],
    {},
    TIMEOUT,
  );

type Turn = {
  prompt: string;
  match: boolean;
  partedAt?: number | "end";
  steps: number;
  divergence?: string;
  differences: Array<{ step: number | "end"; what: string; recorded: string; rerun: string }>;
};
const turnsOf = (out: Record<string, unknown>): Turn[] => (out["comparison"] as { turns: Turn[] }).turns;

test(
  "a recorded multi-tool turn re-runs as a match in a copy of its workspace, and differs at the tool result once a file it reads changes",
  { timeout: 180_000 },
  async () => {
    const testRig = await rig((ws: string) => ({
      responses: [
        {
          content: [
            { type: "text", text: "Looking." },
            { type: "tool_use", name: "Read", input: { file_path: join(ws, "notes.txt") } },
            { type: "tool_use", name: "Bash", input: { command: "wc -l notes.txt && pwd" } },
          ],
        },
        { content: [{ type: "tool_use", name: "Glob", input: { pattern: "*.txt" } }] },
        { content: [{ type: "text", text: "notes.txt has two lines." }] },
      ],
    }));
    try {
      writeFileSync(join(testRig.ws, "notes.txt"), "alpha\nbeta\n");
      const session = await record(testRig, ["Summarise notes.txt."]);
      const copy = join(testRig.ws, "..", "ws-copy");
      cpSync(testRig.ws, copy, { recursive: true });

      const same = await rerun(testRig, [session, "--cwd", copy]);
      assert.equal(same.code, 0, same.stdout + same.stderr);
      const sameOut = onlyJson(same.stdout);
      const [turn] = turnsOf(sameOut);
      assert.equal(turn!.match, true, JSON.stringify(turn));
      assert.equal(turn!.steps, 3, "Read, Bash and Glob compared");

      writeFileSync(join(copy, "notes.txt"), "alpha\ngamma\n");
      const changed = await rerun(testRig, [session, "--cwd", copy]);
      assert.equal(changed.code, 1, changed.stdout + changed.stderr);
      const [diff] = turnsOf(onlyJson(changed.stdout));
      assert.equal(diff!.match, false);
      assert.equal(diff!.partedAt, 1, "the Read result is the first difference");
      assert.equal(diff!.differences[0]!.what, "tool result of Read");
      assert.match(diff!.differences[0]!.recorded, /beta/);
      assert.match(diff!.differences[0]!.rerun, /gamma/);
      assert.match(
        diff!.divergence ?? "",
        /request 2 \(for response 2\): the result of tool call toolu_\S+ \(Read\) differs from the recording's/,
      );

      const text = await turnstream(
        [
          "rerun",
          session,
          "--cwd",
          copy,
          "--permission-mode",
          "bypassPermissions",
          "--prefix",
          testRig.space.logPrefix,
        ],
        {},
        TIMEOUT,
      );
      assert.equal(text.code, 1);
      assert.match(
        text.stdout,
        /differs, the runs parted at step 1\n  step 1: tool result of Read\n    - recorded: .*beta.*\n    \+ re-run: +.*gamma/,
      );
      assert.match(text.stdout, /rerun: 1 turn\(s\), 0 match, 1 differ/);
    } finally {
      await testRig.dispose();
    }
  },
);

test(
  "a recorded session of three turns re-runs turn by turn, the later ones resuming the re-run's session; --turn picks one",
  { timeout: 180_000 },
  async () => {
    const testRig = await rig({
      responses: [1, 2, 3].flatMap((turnNumber) => [
        { content: [{ type: "tool_use", name: "Bash", input: { command: `echo step-${turnNumber}` } }] },
        { content: [{ type: "text", text: `turn ${turnNumber} done` }] },
      ]),
    });
    try {
      const session = await record(testRig, ["first", "second", "third"]);
      const all = await rerun(testRig, [session, "--cwd", testRig.ws]);
      assert.equal(all.code, 0, all.stdout + all.stderr);
      const turns = turnsOf(onlyJson(all.stdout));
      assert.deepEqual(
        turns.map((t) => [t.match, t.steps]),
        [
          [true, 1],
          [true, 1],
          [true, 1],
        ],
      );
      const second = await rerun(testRig, [session, "--turn", "2", "--cwd", testRig.ws]);
      assert.equal(second.code, 0, second.stdout + second.stderr);
      const [only] = turnsOf(onlyJson(second.stdout));
      assert.equal(turnsOf(onlyJson(second.stdout)).length, 1);
      assert.equal(only?.prompt, "second");
    } finally {
      await testRig.dispose();
    }
  },
);

test(
  "a recorded API error re-runs as the same error kind, and a session that is not there is a usage error",
  { timeout: 120_000 },
  async () => {
    const testRig = await rig({
      responses: [
        {
          error: { status: 429, type: "rate_limit_error", message: "Number of requests has exceeded your rate limit" },
        },
      ],
    });
    try {
      const session = await record(testRig, ["Hello?"]);
      const out = await rerun(testRig, [session, "--cwd", testRig.ws]);
      assert.equal(out.code, 0, out.stdout + out.stderr);
      const [turn] = turnsOf(onlyJson(out.stdout));
      assert.equal(turn!.match, true, JSON.stringify(turn));
      const missing = await rerun(testRig, ["no-such-session", "--cwd", testRig.ws]);
      assert.equal(missing.code, 2, missing.stderr);
      assert.equal(onlyJson(missing.stdout)["outcome"], "usage");
    } finally {
      await testRig.dispose();
    }
  },
);
