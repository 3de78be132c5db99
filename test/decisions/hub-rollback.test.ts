// The decision hub claims what it last recorded in a session's log: after a failover that lost its
// records, a request cannot be recorded after the hole, and the call is denied, saying so.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { FORWARDER_PATH } from "../../src/decisions/index.ts";
import { eventsOf, prepare, putRule, withCtx, withHub } from "./_support.ts";

const hookInput = (command: string, id: string) =>
  JSON.stringify({
    session_id: "cli-1",
    hook_event_name: "PreToolUse",
    tool_name: "Bash",
    tool_input: { command },
    tool_use_id: id,
    cwd: "/tmp",
  });

async function forward(runFile: string, stdin: string): Promise<[string, string]> {
  const child = spawn(process.execPath, [FORWARDER_PATH, runFile], { stdio: ["pipe", "pipe", "pipe"] });
  child.stdin.end(stdin);
  let stdout = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  await new Promise((r) => child.on("close", r));
  const out = JSON.parse(stdout) as {
    hookSpecificOutput?: { permissionDecision?: string; permissionDecisionReason?: string };
  };
  return [String(out.hookSpecificOutput?.permissionDecision), String(out.hookSpecificOutput?.permissionDecisionReason)];
}

test("a hook call on a log that lost the hub's records is denied (rolled_back); nothing is appended after the hole", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    await putRule(ctx, "Bash(ls*)", "allow");
    const run = prepare(ctx, hub);
    const keys = ctx.log.keys(ctx.session);
    const saved = await Promise.all(
      [keys.events, keys.meta].map(async (key) => [key, await ctx.redis.dumpBuffer(key)] as const),
    );
    assert.equal((await forward(run.runFile, hookInput("ls -l", "toolu_a")))[0], "allow");
    assert.deepEqual(
      (await eventsOf(ctx)).map((e) => e.kind),
      ["decision.requested", "decision.made"],
    );
    // The failover: the replica had neither record.
    for (const [key, dump] of saved) {
      if (dump === null) await ctx.redis.del(key);
      else await ctx.redis.restore(key, 0, dump, "REPLACE");
    }
    const [decision, reason] = await forward(run.runFile, hookInput("ls -a", "toolu_b"));
    assert.equal(decision, "deny");
    assert.match(reason, /can no longer record requests \(rolled_back\)/);
    assert.deepEqual(await eventsOf(ctx), [], "nothing was appended after the hole");
    run.close();
  });
});
