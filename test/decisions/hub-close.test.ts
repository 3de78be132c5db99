// close() while a request is on its way to the operator (recorded, not yet waiting): the request is
// denied as "the hub shut down" at once. The wait starts after close() aborted the hub's closing
// signal, so it must look at the signal's state, not only listen for the abort (else the request,
// and close(), which waits for it, sat out the whole decision timeout).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { FORWARDER_PATH } from "../../src/decisions/index.ts";
import { nextEvent, prepare, setup, withHub } from "./_support.ts";

const TIMEOUT_MS = 3000;

test("close() right after a request was recorded denies it at once (hub shut down), without waiting out the timeout", async () => {
  const ctx = await setup();
  try {
    const hub = await withHub(ctx, { timeoutMs: TIMEOUT_MS });
    const run = prepare(ctx, hub);
    const child = spawn(process.execPath, [FORWARDER_PATH, run.runFile], { stdio: ["pipe", "pipe", "ignore"] });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
    const answered = new Promise<void>((r) => child.on("close", () => r()));
    child.stdin.end(
      JSON.stringify({
        session_id: "cli-1",
        hook_event_name: "PreToolUse",
        tool_name: "Bash",
        tool_input: { command: "ls" },
        tool_use_id: "toolu_close",
        cwd: ctx.dir,
      }),
    );
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
});
