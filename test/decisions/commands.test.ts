// `turnstream pending`, `turnstream decide` and `turnstream operator-key` as operators run them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { statSync } from "node:fs";
import { join } from "node:path";
import { FORWARDER_PATH, writeOperatorKeyFile } from "../../src/decisions/index.ts";
import { cli, eventsOf, nextEvent, OPERATOR, prepare, setup, waitFor, withHub } from "./_support.ts";

test("pending --json lists the waiting call; decide --always --reason records who/why and adds the rule", async () => {
  const ctx = await setup();
  try {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub);
    const fwd = spawn(process.execPath, [FORWARDER_PATH, run.runFile], { stdio: ["pipe", "pipe", "ignore"] });
    let out = "";
    fwd.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
    const fwdClosed = new Promise((r) => fwd.on("close", r));
    fwd.stdin.end(
      JSON.stringify({
        hook_event_name: "PreToolUse",
        tool_name: "Bash",
        tool_input: { command: "npm test" },
        tool_use_id: "toolu_c1",
      }),
    );
    const req = await nextEvent(ctx, "decision.requested");
    const requestId = (req.data as { requestId: string }).requestId;
    const keyFile = join(ctx.dir, "keys", "operator.key");
    writeOperatorKeyFile(keyFile, OPERATOR.privateKeyPem);
    const env = { TURNSTREAM_PREFIX: ctx.prefix, TURNSTREAM_USER: "erin", TURNSTREAM_OPERATOR_KEY: keyFile };
    const listed = await waitFor(async () => {
      const pendingRun = await cli(["pending", "--json"], env);
      const mine = (JSON.parse(pendingRun.stdout) as Array<{ requestId: string; status: string; input: string }>).find(
        (p) => p.requestId === requestId,
      );
      return mine;
    });
    assert.equal(listed.status, "pending");
    assert.match(listed.input, /npm test/);
    const text = await cli(["pending"], env);
    assert.match(text.stdout, new RegExp(`${ctx.session} ${requestId} Bash \\[exec\\]`));
    assert.equal((await cli(["decide", ctx.session, requestId, "maybe"], env)).code, 2);
    const decided = await cli(["decide", ctx.session, requestId, "allow", "--always", "--reason", "CI only"], env);
    assert.equal(decided.code, 0, decided.stderr);
    assert.match(decided.stdout, /rule Bash\(npm test\) added/);
    await fwdClosed;
    assert.equal(JSON.parse(out).hookSpecificOutput.permissionDecision, "allow");
    const [made] = await eventsOf(ctx, "decision.made");
    assert.equal((made!.data as { by: string }).by, "erin");
    assert.equal((made!.data as { reason: string }).reason, "CI only");
    const again = await cli(["decide", ctx.session, requestId, "deny"], env);
    assert.equal(again.code, 2);
    assert.match(again.stderr, /already decided \(allow by erin\)/);
    assert.equal((await cli(["pending"], env)).stdout, "no pending decisions\n");
    run.close();
  } finally {
    await ctx.cleanup();
  }
});

test("operator-key new writes a 0600 key and prints its public key; public prints it again; decide without a key says what to set", async () => {
  const ctx = await setup();
  try {
    const file = join(ctx.dir, "k", "alice.key");
    const made = await cli(["operator-key", "new", "--out", file, "--name", "alice"], {});
    assert.equal(made.code, 0, made.stderr);
    assert.match(made.stdout, /^ed25519:[A-Za-z0-9_-]{43} alice\n$/);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.match(made.stderr, /TURNSTREAM_OPERATOR_KEY=.*TURNSTREAM_OPERATOR_KEYS/);
    const again = await cli(["operator-key", "new", "--out", file], {});
    assert.equal(again.code, 2);
    assert.match(again.stderr, /already exists/);
    const pub = await cli(["operator-key", "public", file], {});
    assert.equal(pub.stdout, made.stdout.replace(" alice", ""));
    const keyless = await cli(["decide", ctx.session, "dr-x", "allow"], {
      TURNSTREAM_PREFIX: ctx.prefix,
      TURNSTREAM_OPERATOR_KEY: "",
    });
    assert.equal(keyless.code, 2);
    assert.match(keyless.stderr, /set TURNSTREAM_OPERATOR_KEY to your private key file.*operator-key new/);
  } finally {
    await ctx.cleanup();
  }
});
