// close() while a request is on its way to the operator (recorded, not yet waiting): the request
// should be denied as "the hub shut down" at once. Today it is not: #waitForOperator adds its abort
// listener to the hub's closing signal after close() already aborted it, so the listener never fires
// and the request (and close(), which waits for it) sits out the whole decision timeout, 300 s by
// default. Marked todo until the hub checks `closing.aborted` before it waits; drop the todo then.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { FORWARDER_PATH } from "../../src/decisions/index.ts";
import { nextEvent, prepare, setup, withHub } from "./_support.ts";

const TIMEOUT_MS = 3000;

test(
  "close() right after a request was recorded denies it at once (hub shut down), without waiting out the timeout",
  { todo: "hub: a request that reaches the wait after close() waits for the full timeout" },
  async () => {
    const ctx = await setup();
    try {
      const hub = await withHub(ctx, { timeoutMs: TIMEOUT_MS });
      const run = prepare(ctx, hub);
      const child = spawn(process.execPath, [FORWARDER_PATH, run.runFile], { stdio: ["pipe", "pipe", "ignore"] });
      let out = "";
      child.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
      const answered = new Promise<void>((r) => child.on("close", () => r()));
      child.stdin.end(JSON.stringify({ session_id: "cli-1", hook_event_name: "PreToolUse", tool_name: "Bash", tool_input: { command: "ls" }, tool_use_id: "toolu_close", cwd: ctx.dir }));
      await nextEvent(ctx, "decision.requested", 1, 20_000);
      const t0 = Date.now();
      await hub.close();
      const took = Date.now() - t0;
      await answered;
      run.close();
      assert.match(out, /"permissionDecision":"deny"/);
      assert.match(out, /shut down|shutting down/, `denied for the shutdown, not the timeout: ${out}`);
      assert.ok(took < TIMEOUT_MS / 2, `close() took ${took} ms (decision timeout ${TIMEOUT_MS} ms)`);
    } finally {
      await ctx.cleanup();
    }
  },
);
