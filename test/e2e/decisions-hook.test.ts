// Supervised turns with the real CLI through the model server: the PreToolUse hook forwards to the
// hub, operators and rules decide, and every failure on the way denies.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FORWARDER_PATH, listPending } from "../../src/decisions/index.ts";
import { bash, decideAs, eventsOf, nextEvent, pidsRunning, putRule, waitFor, prepare, setup, supervisedTurn, withHub, type Ctx } from "../decisions/_support.ts";

async function withCtx(fn: (ctx: Ctx) => Promise<void>): Promise<void> {
  const ctx = await setup();
  try {
    await fn(ctx);
  } finally {
    await ctx.cleanup();
  }
}

/** A stand-in hub: `onRequest` decides what the forwarder gets back. */
async function fakeHub(onRequest: (req: import("node:http").IncomingMessage, res: import("node:http").ServerResponse) => void): Promise<{ url: string; server: Server }> {
  const server = createServer(onRequest);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

const closeServer = (s: Server): Promise<void> =>
  new Promise((r) => {
    s.closeAllConnections();
    s.close(() => r());
  });

function pointRunFileAt(runFile: string, patch: Record<string, unknown>): void {
  writeFileSync(runFile, JSON.stringify({ ...JSON.parse(readFileSync(runFile, "utf8")), ...patch }));
}

test("operator allow: the tool runs; the log has decision.requested then decision.made with who/when/why", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub);
    const target = join(ctx.dir, "allowed.txt");
    const operator = (async () => {
      const req = await nextEvent(ctx, "decision.requested");
      const mine = await waitFor(async () => (await listPending({ redis: ctx.redis, prefix: ctx.prefix })).find((p) => p.session === ctx.session));
      assert.equal(mine?.status, "pending");
      assert.equal(mine?.tool, "Bash");
      return decideAs(ctx, { requestId: (req.data as { requestId: string }).requestId, decision: "allow", by: "alice", reason: "looks fine" });
    })();
    const r = await supervisedTurn(ctx, run, [bash(`touch ${target}`)]);
    const d = await operator;
    assert.equal(d.applied, true);
    assert.equal(existsSync(target), true, "the allowed command ran");
    assert.deepEqual(r.denials, []);
    assert.match(JSON.stringify(r.toolResults[0]!.meta), /"source":"hook"/);
    const [requested] = await eventsOf(ctx, "decision.requested");
    const [made] = await eventsOf(ctx, "decision.made");
    assert.equal(requested!.epoch, ctx.epoch, "decision.requested is fenced with the attempt's epoch");
    const rd = requested!.data as Record<string, unknown>;
    assert.equal(rd["tool"], "Bash");
    assert.equal(rd["riskClass"], "exec");
    assert.match(String(rd["input"]), /touch /);
    assert.match(String(rd["toolUseId"]), /^toolu_/);
    assert.equal(made!.epoch, 0);
    assert.ok(made!.seq > requested!.seq);
    const { keyId, signature, requestDigest, ...plain } = made!.data as Record<string, unknown>;
    assert.deepEqual({ ...plain, decidedAt: "x" }, { requestId: rd["requestId"], decision: "allow", by: "alice", source: "operator", reason: "looks fine", decidedAt: "x" });
    assert.match(String(keyId), /^op-[0-9a-f]{16}$/);
    assert.match(String(signature), /^[A-Za-z0-9_-]{86}$/);
    assert.match(String(requestDigest), /^[0-9a-f]{64}$/);
    assert.deepEqual((await listPending({ redis: ctx.redis, prefix: ctx.prefix })).filter((p) => p.session === ctx.session), [], "index cleaned");
    run.close();
  });
});

test("operator deny: the tool result shows the denial with the reason, permission_denials lists it", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub);
    const target = join(ctx.dir, "denied.txt");
    const operator = (async () => {
      const req = await nextEvent(ctx, "decision.requested");
      return decideAs(ctx, { requestId: (req.data as { requestId: string }).requestId, decision: "deny", by: "bob", reason: "not on prod" });
    })();
    const r = await supervisedTurn(ctx, run, [bash(`touch ${target}`)]);
    await operator;
    assert.equal(existsSync(target), false);
    assert.equal(r.toolResults[0]!.isError, true);
    assert.match(r.toolResults[0]!.content, /denied by bob: not on prod/);
    assert.equal(r.denials.length, 1);
    assert.equal(r.denials[0]!.tool_name, "Bash");
    run.close();
  });
});

test("no operator within the timeout: denied, recorded with timeoutPolicy escalate, pending index cleaned", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx, { timeoutMs: 1500 });
    const run = prepare(ctx, hub);
    const r = await supervisedTurn(ctx, run, [bash("echo marker-ran")]);
    assert.match(r.toolResults[0]!.content, /no operator decided within 2 s/);
    assert.doesNotMatch(r.toolResults[0]!.content, /marker-ran/);
    assert.equal(r.denials.length, 1);
    const [made] = await eventsOf(ctx, "decision.made");
    assert.equal((made!.data as Record<string, unknown>)["timeoutPolicy"], "escalate");
    assert.equal((made!.data as Record<string, unknown>)["source"], "timeout");
    assert.deepEqual((await listPending({ redis: ctx.redis, prefix: ctx.prefix })).filter((p) => p.session === ctx.session), []);
    run.close();
  });
});

test("hub down: denied by the forwarder, even for a read-only command", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub);
    await hub.close();
    const r = await supervisedTurn(ctx, run, [bash("echo marker-ran")]);
    assert.match(r.toolResults[0]!.content, /decision hub could not be reached/);
    assert.doesNotMatch(r.toolResults[0]!.content, /marker-ran/);
    assert.equal(r.denials.length, 1);
    run.close();
  });
});

test("bad token: the hub refuses (401) and the call is denied; nothing is recorded", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub);
    pointRunFileAt(run.runFile, { token: "not-the-token" });
    const r = await supervisedTurn(ctx, run, [bash("echo marker-ran")]);
    assert.match(r.toolResults[0]!.content, /HTTP 401/);
    assert.equal(r.denials.length, 1);
    assert.deepEqual(await eventsOf(ctx, "decision.requested"), []);
    run.close();
  });
});

test("malformed hub reply (200, not JSON; and a reply with the wrong nonce): denied", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub);
    const fake = await fakeHub((req, res) => {
      req.resume();
      req.on("end", () => {
        if (req.headers["x-turnstream-nonce"] === undefined) return res.end();
        res.writeHead(200, { "content-type": "application/json" });
        // First call: garbage. Second: a well-formed allow that answers some other request.
        res.end(seen++ === 0 ? "{not json" : JSON.stringify({ decision: "allow", reason: "ok", nonce: "someone-else" }));
      });
    });
    let seen = 0;
    try {
      pointRunFileAt(run.runFile, { url: fake.url });
      const r = await supervisedTurn(ctx, run, [bash("echo marker-one"), bash("echo marker-two")]);
      assert.equal(seen, 2);
      assert.match(r.toolResults[0]!.content, /reply was not JSON/);
      assert.match(r.toolResults[1]!.content, /reply was malformed/);
      assert.equal(r.denials.length, 2);
      assert.doesNotMatch(JSON.stringify(r.toolResults), /marker-(one|two)/);
    } finally {
      await closeServer(fake.server);
      run.close();
    }
  });
});

test("hook killed mid-call: the tool does not run (exit 2 fallback), even a read-only command", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub);
    let killed: number[] = [];
    const fake = await fakeHub((req) => {
      // The forwarder is waiting for this reply: kill it the way an OOM killer would.
      killed = pidsRunning(FORWARDER_PATH, run.runFile);
      for (const pid of killed) process.kill(pid, "SIGKILL");
      req.resume();
    });
    try {
      pointRunFileAt(run.runFile, { url: fake.url });
      const target = join(ctx.dir, "killed.txt");
      const r = await supervisedTurn(ctx, run, [bash("echo marker-ran"), bash(`touch ${target}`)]);
      assert.equal(killed.length, 1, "one forwarder process was found and killed");
      assert.match(r.toolResults[0]!.content, /permission hook failed, so this call is denied/);
      assert.doesNotMatch(r.toolResults[0]!.content, /marker-ran/);
      assert.equal(existsSync(target), false);
      assert.equal(r.denials.length, 2);
    } finally {
      await closeServer(fake.server);
      run.close();
    }
  });
});

test("hook cannot start (node missing): denied by the exit 2 fallback", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub, { nodePath: join(ctx.dir, "no-such-node") });
    const r = await supervisedTurn(ctx, run, [bash("echo marker-ran")]);
    assert.match(r.toolResults[0]!.content, /permission hook failed/);
    assert.doesNotMatch(r.toolResults[0]!.content, /marker-ran/);
    assert.equal(r.denials.length, 1);
    run.close();
  });
});

test("hub hangs: the forwarder's own deadline (inside the hook timeout) denies; the CLI's hook timeout refuses a write", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const fake = await fakeHub((req) => req.resume());
    const own = prepare(ctx, hub, { forwarderTimeoutMs: 1000 });
    const cliTimeout = prepare(ctx, hub, { forwarderTimeoutMs: 60_000, hookTimeoutSec: 2 });
    try {
      pointRunFileAt(own.runFile, { url: fake.url });
      pointRunFileAt(cliTimeout.runFile, { url: fake.url });
      const a = await supervisedTurn(ctx, own, [bash("echo marker-ran")]);
      assert.match(a.toolResults[0]!.content, /no decision arrived in time/);
      assert.equal(a.denials.length, 1);
      // The CLI cancels the hook and falls back to the default mode, which refuses what needs approval.
      const target = join(ctx.dir, "timeout.txt");
      const b = await supervisedTurn(ctx, cliTimeout, [bash(`touch ${target}`)]);
      assert.equal(existsSync(target), false);
      assert.equal(b.denials.length, 1);
    } finally {
      await closeServer(fake.server);
      own.close();
      cliTimeout.close();
    }
  });
});

test("a trust rule allows at once without asking; TodoWrite is not caught by the Write matcher", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const rule = await putRule(ctx, "Bash(touch *)");
    const run = prepare(ctx, hub);
    const target = join(ctx.dir, "by-rule.txt");
    const todo = { content: [{ type: "tool_use" as const, name: "TodoWrite", input: { todos: [{ content: "x", status: "pending", activeForm: "doing x" }] } }] };
    const r = await supervisedTurn(ctx, run, [todo, bash(`touch ${target}`)]);
    assert.equal(existsSync(target), true);
    const requested = await eventsOf(ctx, "decision.requested");
    assert.deepEqual(requested.map((e) => (e.data as { tool: string }).tool), ["Bash"], "TodoWrite never reached the hub");
    const [made] = await eventsOf(ctx, "decision.made");
    assert.equal((made!.data as Record<string, unknown>)["source"], "rule");
    assert.equal((made!.data as Record<string, unknown>)["ruleId"], rule.id);
    assert.deepEqual(r.denials, []);
    run.close();
  });
});

test("--always: the decision becomes a fleet-wide rule (rule.added recorded) that the next turn uses", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const target = join(ctx.dir, "always.txt");
    const command = `touch ${target}`;
    const run1 = prepare(ctx, hub);
    const operator = (async () => {
      const req = await nextEvent(ctx, "decision.requested");
      return decideAs(ctx, { requestId: (req.data as { requestId: string }).requestId, decision: "allow", by: "dave", always: true, reason: "routine" });
    })();
    await supervisedTurn(ctx, run1, [bash(command)]);
    const d = await operator;
    assert.equal(d.rule?.pattern, `Bash(${command})`);
    const [added] = await eventsOf(ctx, "rule.added");
    assert.equal((added!.data as Record<string, unknown>)["pattern"], `Bash(${command})`);
    assert.equal((added!.data as Record<string, unknown>)["by"], "dave");
    run1.close();
    const run2 = prepare(ctx, hub);
    const r2 = await supervisedTurn(ctx, run2, [bash(command)]);
    assert.deepEqual(r2.denials, []);
    const made = await eventsOf(ctx, "decision.made");
    assert.equal(made.length, 2);
    assert.equal((made[1]!.data as Record<string, unknown>)["source"], "rule");
    assert.equal((made[1]!.data as Record<string, unknown>)["ruleId"], d.rule!.id);
    run2.close();
  });
});
