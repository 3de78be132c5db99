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

async function record(r: Rig, prompts: string[]): Promise<string> {
  r.worker({ sandboxed: true, retry: { maxAttempts: 1 } });
  let session: string | undefined;
  for (const prompt of prompts) {
    const q = await r.producer.enqueueTurn({ session, prompt, cwd: r.ws, options: { skipPermissions: true } });
    session = q.session;
    await r.producer.waitForTurn(q.turn, { session, timeoutMs: TIMEOUT });
  }
  return session!;
}

/** The turns were recorded with permissions skipped: the operator grants that mode, the recording never does. */
const rerun = (r: Rig, args: string[]) =>
  turnstream(
    ["rerun", ...args, "--permission-mode", "bypassPermissions", "--prefix", r.space.logPrefix, "--json"],
    {},
    TIMEOUT,
  );

type Turn = {
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
    const r = await rig((ws: string) => ({
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
      writeFileSync(join(r.ws, "notes.txt"), "alpha\nbeta\n");
      const session = await record(r, ["Summarise notes.txt."]);
      const copy = join(r.ws, "..", "ws-copy");
      cpSync(r.ws, copy, { recursive: true });

      const same = await rerun(r, [session, "--cwd", copy]);
      assert.equal(same.code, 0, same.stdout + same.stderr);
      const sameOut = onlyJson(same.stdout);
      const [turn] = turnsOf(sameOut);
      assert.equal(turn!.match, true, JSON.stringify(turn));
      assert.equal(turn!.steps, 3, "Read, Bash and Glob compared");

      writeFileSync(join(copy, "notes.txt"), "alpha\ngamma\n");
      const changed = await rerun(r, [session, "--cwd", copy]);
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
        ["rerun", session, "--cwd", copy, "--permission-mode", "bypassPermissions", "--prefix", r.space.logPrefix],
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
      await r.dispose();
    }
  },
);

test(
  "a recorded session of three turns re-runs turn by turn, the later ones resuming the re-run's session; --turn picks one",
  { timeout: 180_000 },
  async () => {
    const r = await rig({
      responses: [1, 2, 3].flatMap((n) => [
        { content: [{ type: "tool_use", name: "Bash", input: { command: `echo step-${n}` } }] },
        { content: [{ type: "text", text: `turn ${n} done` }] },
      ]),
    });
    try {
      const session = await record(r, ["first", "second", "third"]);
      const all = await rerun(r, [session, "--cwd", r.ws]);
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
      const second = await rerun(r, [session, "--turn", "2", "--cwd", r.ws]);
      assert.equal(second.code, 0, second.stdout + second.stderr);
      const [only] = turnsOf(onlyJson(second.stdout));
      assert.equal(turnsOf(onlyJson(second.stdout)).length, 1);
      assert.equal((only as unknown as { prompt: string }).prompt, "second");
    } finally {
      await r.dispose();
    }
  },
);

test(
  "a recorded API error re-runs as the same error kind, and a session that is not there is a usage error",
  { timeout: 120_000 },
  async () => {
    const r = await rig({
      responses: [
        {
          error: { status: 429, type: "rate_limit_error", message: "Number of requests has exceeded your rate limit" },
        },
      ],
    });
    try {
      const session = await record(r, ["Hello?"]);
      const out = await rerun(r, [session, "--cwd", r.ws]);
      assert.equal(out.code, 0, out.stdout + out.stderr);
      const [turn] = turnsOf(onlyJson(out.stdout));
      assert.equal(turn!.match, true, JSON.stringify(turn));
      const missing = await rerun(r, ["no-such-session", "--cwd", r.ws]);
      assert.equal(missing.code, 2, missing.stderr);
      assert.equal(onlyJson(missing.stdout)["outcome"], "usage");
    } finally {
      await r.dispose();
    }
  },
);
