// Supervised turns with the real CLI through the model server: the PreToolUse hook forwards to the
// hub, operators and rules decide, and every failure on the way denies.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  DecisionError,
  decisionRequestedData,
  foldDecisions,
  FORWARDER_PATH,
  listPending,
  requestDigest,
  RuleStore,
  ruleId,
  rulesKey,
  signDecision,
  signRule,
  writeOperatorKeyFile,
} from "../../src/decisions/index.ts";
import { createScrubber } from "../../src/telemetry/index.ts";
import {
  bash,
  decideAs,
  eventsOf,
  mcpProbeConfig,
  nextEvent,
  OPERATOR,
  operatorKey,
  pidsRunning,
  putRule,
  stranger,
  trustedKeys,
  waitFor,
  prepare,
  supervisedTurn,
  withHub,
  cli,
  withCtx,
} from "../decisions/_support.ts";

/** A stand-in hub: `onRequest` decides what the forwarder gets back. */
async function fakeHub(
  onRequest: (req: import("node:http").IncomingMessage, res: import("node:http").ServerResponse) => void,
): Promise<{ url: string; server: Server }> {
  const server = createServer(onRequest);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

const closeServer = (server: Server): Promise<void> =>
  new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
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
      const mine = await waitFor(async () =>
        (await listPending({ redis: ctx.redis, prefix: ctx.prefix })).find((p) => p.session === ctx.session),
      );
      assert.equal(mine?.status, "pending");
      assert.equal(mine?.tool, "Bash");
      return decideAs(ctx, {
        requestId: (req.data as { requestId: string }).requestId,
        decision: "allow",
        by: "alice",
        reason: "looks fine",
      });
    })();
    const turn = await supervisedTurn(ctx, run, [bash(`touch ${target}`)]);
    const decided = await operator;
    assert.equal(decided.applied, true);
    assert.equal(existsSync(target), true, "the allowed command ran");
    assert.deepEqual(turn.denials, []);
    assert.match(JSON.stringify(turn.toolResults[0]!.meta), /"source":"hook"/);
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
    assert.deepEqual(
      { ...plain, decidedAt: "x" },
      {
        requestId: rd["requestId"],
        decision: "allow",
        by: "alice",
        source: "operator",
        reason: "looks fine",
        decidedAt: "x",
      },
    );
    assert.match(String(keyId), /^op-[0-9a-f]{16}$/);
    assert.match(String(signature), /^[A-Za-z0-9_-]{86}$/);
    assert.match(String(requestDigest), /^[0-9a-f]{64}$/);
    assert.deepEqual(
      (await listPending({ redis: ctx.redis, prefix: ctx.prefix })).filter((p) => p.session === ctx.session),
      [],
      "index cleaned",
    );
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
      return decideAs(ctx, {
        requestId: (req.data as { requestId: string }).requestId,
        decision: "deny",
        by: "bob",
        reason: "not on prod",
      });
    })();
    const turn = await supervisedTurn(ctx, run, [bash(`touch ${target}`)]);
    await operator;
    assert.equal(existsSync(target), false);
    assert.equal(turn.toolResults[0]!.isError, true);
    assert.match(turn.toolResults[0]!.content, /denied by bob: not on prod/);
    assert.equal(turn.denials.length, 1);
    assert.equal(turn.denials[0]!.tool_name, "Bash");
    run.close();
  });
});

test("no operator within the timeout: denied, recorded with timeoutPolicy escalate, pending index cleaned", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx, { timeoutMs: 1500 });
    const run = prepare(ctx, hub);
    const turn = await supervisedTurn(ctx, run, [bash("echo marker-ran")]);
    assert.match(turn.toolResults[0]!.content, /no operator decided within 2 s/);
    assert.doesNotMatch(turn.toolResults[0]!.content, /marker-ran/);
    assert.equal(turn.denials.length, 1);
    const [made] = await eventsOf(ctx, "decision.made");
    assert.equal((made!.data as Record<string, unknown>)["timeoutPolicy"], "escalate");
    assert.equal((made!.data as Record<string, unknown>)["source"], "timeout");
    assert.deepEqual(
      (await listPending({ redis: ctx.redis, prefix: ctx.prefix })).filter((p) => p.session === ctx.session),
      [],
    );
    run.close();
  });
});

test("hub down: denied by the forwarder, even for a read-only command", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub);
    await hub.close();
    const turn = await supervisedTurn(ctx, run, [bash("echo marker-ran")]);
    assert.match(turn.toolResults[0]!.content, /decision hub could not be reached/);
    assert.doesNotMatch(turn.toolResults[0]!.content, /marker-ran/);
    assert.equal(turn.denials.length, 1);
    run.close();
  });
});

test("bad token: the hub refuses (401) and the call is denied; nothing is recorded", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub);
    pointRunFileAt(run.runFile, { token: "not-the-token" });
    const turn = await supervisedTurn(ctx, run, [bash("echo marker-ran")]);
    assert.match(turn.toolResults[0]!.content, /HTTP 401/);
    assert.equal(turn.denials.length, 1);
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
        res.end(
          seen++ === 0 ? "{not json" : JSON.stringify({ decision: "allow", reason: "ok", nonce: "someone-else" }),
        );
      });
    });
    let seen = 0;
    try {
      pointRunFileAt(run.runFile, { url: fake.url });
      const turn = await supervisedTurn(ctx, run, [bash("echo marker-one"), bash("echo marker-two")]);
      assert.equal(seen, 2);
      assert.match(turn.toolResults[0]!.content, /reply was not JSON/);
      assert.match(turn.toolResults[1]!.content, /reply was malformed/);
      assert.equal(turn.denials.length, 2);
      assert.doesNotMatch(JSON.stringify(turn.toolResults), /marker-(one|two)/);
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
      const turn = await supervisedTurn(ctx, run, [bash("echo marker-ran"), bash(`touch ${target}`)]);
      assert.equal(killed.length, 1, "one forwarder process was found and killed");
      assert.match(turn.toolResults[0]!.content, /permission hook failed, so this call is denied/);
      assert.doesNotMatch(turn.toolResults[0]!.content, /marker-ran/);
      assert.equal(existsSync(target), false);
      assert.equal(turn.denials.length, 2);
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
    const turn = await supervisedTurn(ctx, run, [bash("echo marker-ran")]);
    assert.match(turn.toolResults[0]!.content, /permission hook failed/);
    assert.doesNotMatch(turn.toolResults[0]!.content, /marker-ran/);
    assert.equal(turn.denials.length, 1);
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
      const ownTurn = await supervisedTurn(ctx, own, [bash("echo marker-ran")]);
      assert.match(ownTurn.toolResults[0]!.content, /no decision arrived in time/);
      assert.equal(ownTurn.denials.length, 1);
      // The CLI cancels the hook and falls back to the default mode, which refuses what needs approval.
      const target = join(ctx.dir, "timeout.txt");
      const cliTurn = await supervisedTurn(ctx, cliTimeout, [bash(`touch ${target}`)]);
      assert.equal(existsSync(target), false);
      assert.equal(cliTurn.denials.length, 1);
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
    const todo = {
      content: [
        {
          type: "tool_use" as const,
          name: "TodoWrite",
          input: { todos: [{ content: "x", status: "pending", activeForm: "doing x" }] },
        },
      ],
    };
    const turn = await supervisedTurn(ctx, run, [todo, bash(`touch ${target}`)]);
    assert.equal(existsSync(target), true);
    const requested = await eventsOf(ctx, "decision.requested");
    assert.deepEqual(
      requested.map((e) => (e.data as { tool: string }).tool),
      ["Bash"],
      "TodoWrite never reached the hub",
    );
    const [made] = await eventsOf(ctx, "decision.made");
    assert.equal((made!.data as Record<string, unknown>)["source"], "rule");
    assert.equal((made!.data as Record<string, unknown>)["ruleId"], rule.id);
    assert.deepEqual(turn.denials, []);
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
      return decideAs(ctx, {
        requestId: (req.data as { requestId: string }).requestId,
        decision: "allow",
        by: "dave",
        always: true,
        reason: "routine",
      });
    })();
    await supervisedTurn(ctx, run1, [bash(command)]);
    const decided = await operator;
    assert.equal(decided.rule?.pattern, `Bash(${command})`);
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
    assert.equal((made[1]!.data as Record<string, unknown>)["ruleId"], decided.rule!.id);
    run2.close();
  });
});

// ---- attacks on supervised mode: each of these let a tool run before operator keys, the redaction
// flag, the forwarder's fixed environment and the wider matcher. ----------------------------------

const requestIdOf = (ev: { data: unknown }): string => (ev.data as { requestId: string }).requestId;

test("forged decisions and rules are ignored: unsigned, hub-sourced, foreign-key, reused from another request, tampered rule", async () => {
  await withCtx(async (ctx) => {
    const warned: Array<{ msg: string; why: unknown }> = [];
    const logger = {
      debug() {},
      info() {},
      error() {},
      warn: (o: Record<string, unknown>, msg?: string) => void warned.push({ msg: msg ?? "", why: o["why"] }),
    };
    const hub = await withHub(ctx, { logger });
    // Rules anyone with Redis write access could plant: unsigned, signed by an untrusted key, and a
    // trusted rule widened after signing (its id recomputed to match).
    const store = new RuleStore(ctx.redis, ctx.prefix);
    const unsigned = {
      id: ruleId("allow", "Bash"),
      pattern: "Bash",
      effect: "allow",
      by: "mallory",
      at: new Date().toISOString(),
    };
    await ctx.redis.hset(rulesKey(ctx.prefix), unsigned.id, JSON.stringify(unsigned));
    await store.put(
      signRule(stranger, {
        id: ruleId("allow", "Bash(touch *)"),
        pattern: "Bash(touch *)",
        effect: "allow",
        by: "mallory",
        at: new Date().toISOString(),
      }),
    );
    const narrow = await putRule(ctx, "Bash(echo harmless)");
    const widened = { ...narrow, id: ruleId("allow", "Bash(*)"), pattern: "Bash(*)" };
    await ctx.redis.hset(rulesKey(ctx.prefix), widened.id, JSON.stringify(widened));
    const [first, second, third] = ["first.txt", "second.txt", "third.txt"].map((f) => join(ctx.dir, f)) as [
      string,
      string,
      string,
    ];
    const run = prepare(ctx, hub);
    const forge = (data: Record<string, unknown>) =>
      ctx.log.appendUnfenced(ctx.session, [{ turn: ctx.turn, attempt: ctx.attempt, kind: "decision.made", data }]);
    const attacker = (async () => {
      // A legitimate allow for the first request…
      const firstRequest = await nextEvent(ctx, "decision.requested");
      const good = await decideAs(ctx, { requestId: requestIdOf(firstRequest), decision: "allow", by: "alice" });
      // …then forgeries for the second, each appended where the hub reads them, then the operator's deny.
      const secondRequest = await nextEvent(ctx, "decision.requested", firstRequest.seq + 1);
      const id = requestIdOf(secondRequest);
      const base = {
        requestId: id,
        decision: "allow" as const,
        by: "mallory",
        reason: "",
        decidedAt: new Date().toISOString(),
      };
      const digestB = requestDigest(ctx.session, decisionRequestedData.parse(secondRequest.data));
      await forge({ ...base, source: "operator" });
      await forge({ ...good.decision, requestId: id });
      await forge({ ...good.decision, requestId: id, requestDigest: digestB });
      await forge(signDecision(stranger, ctx.session, { ...base, source: "operator", requestDigest: digestB }));
      await decideAs(ctx, { requestId: id, decision: "deny", by: "alice", reason: "after the forgeries" });
      // The third: a record claiming the hub's own rule verdict. decide() cannot tell it from a real
      // one (it would answer "already decided"), so the operator's signed deny is appended directly.
      const thirdRequest = await nextEvent(ctx, "decision.requested", secondRequest.seq + 1);
      await forge({ ...base, requestId: requestIdOf(thirdRequest), source: "rule", ruleId: unsigned.id });
      const digest = requestDigest(ctx.session, decisionRequestedData.parse(thirdRequest.data));
      await forge(
        signDecision(operatorKey, ctx.session, {
          ...base,
          requestId: requestIdOf(thirdRequest),
          by: "alice",
          source: "operator",
          decision: "deny",
          requestDigest: digest,
        }),
      );
    })();
    const turn = await supervisedTurn(ctx, run, [
      bash(`touch ${first}`),
      bash(`touch ${second}`),
      bash(`touch ${third}`),
    ]);
    await attacker;
    assert.equal(existsSync(first), true, "the signed allow ran the first call");
    assert.equal(existsSync(second), false, "no forged allow ran the second call");
    assert.equal(existsSync(third), false, "a forged rule verdict did not run the third call");
    assert.match(turn.toolResults[1]!.content, /denied by alice: after the forgeries/);
    const why = warned.filter((w) => w.msg.startsWith("ignored a decision")).map((w) => String(w.why));
    assert.deepEqual(why, [
      "it is not signed",
      "it was signed for a different request",
      "its signature does not match",
      `its key ${stranger.keyId} is not one of this worker's operator keys`,
      'it claims source "rule", which only the hub itself records',
    ]);
    const rules = warned
      .filter((w) => w.msg.startsWith("ignored a trust rule"))
      .map((w) => String(w.why))
      .sort();
    assert.deepEqual(
      rules,
      [
        `its key ${stranger.keyId} is not one of this worker's operator keys`,
        "its signature does not match",
        "it is not signed",
      ].sort(),
    );
    // The folded state agrees with the hub: the forged allows do not decide the second request.
    const state = foldDecisions(await eventsOf(ctx), undefined, trustedKeys);
    const secondId = requestIdOf((await eventsOf(ctx, "decision.requested"))[1]!);
    assert.deepEqual([state.requests[secondId]!.made?.by, state.requests[secondId]!.made?.decision], ["alice", "deny"]);
    run.close();
  });
});

test("a redacted request: shown as such, allow refused unless allowRedacted (recorded), no rule from its scrubbed subject, rules match the raw command", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx, { scrubber: createScrubber({ env: {} }) });
    // The model hides a command substitution where the scrubber redacts a URL password.
    const command = "psql postgres://app:$(touch${IFS}pwned)@db/app -c 'select 1'";
    const pwned = join(ctx.dir, "pwned");
    const keyFile = join(ctx.dir, "keys", "operator.key");
    writeOperatorKeyFile(keyFile, OPERATOR.privateKeyPem);
    const env = { TURNSTREAM_PREFIX: ctx.prefix, TURNSTREAM_USER: "alice", TURNSTREAM_OPERATOR_KEY: keyFile };
    // A rule built from what operators see would match the scrubbed text; against the raw command the
    // wildcard never matches a compound command.
    await putRule(ctx, "Bash(psql postgres://app:*@db/app -c 'select 1')");
    const run = prepare(ctx, hub);
    const operator = (async () => {
      const req = await nextEvent(ctx, "decision.requested");
      const id = requestIdOf(req);
      const data = req.data as { input: string; subject: string; redacted: string[] };
      assert.deepEqual(data.redacted, ["connection_password"]);
      assert.match(data.subject, /app:\[REDACTED:connection_password\]@db/);
      assert.doesNotMatch(JSON.stringify(req.data), /touch/, "the secret-shaped text never reaches Redis");
      const listed = await waitFor(async () =>
        (await listPending({ redis: ctx.redis, prefix: ctx.prefix })).find((p) => p.requestId === id),
      );
      assert.deepEqual(listed.redacted, ["connection_password"]);
      const text = await cli(["pending"], env);
      assert.match(text.stdout, /contains redacted text \(connection_password\): the exact input is not shown/);
      const refused = await cli(["decide", ctx.session, id, "allow"], env);
      assert.equal(refused.code, 2);
      assert.match(
        refused.stderr,
        /contains redacted text \(connection_password\): the exact input is not shown.*deny it, or pass --allow-redacted/,
      );
      await assert.rejects(
        decideAs(ctx, { requestId: id, decision: "allow", by: "alice" }),
        (e: unknown) => e instanceof DecisionError && e.problem === "redacted",
      );
      await assert.rejects(
        decideAs(ctx, { requestId: id, decision: "allow", by: "alice", always: true, allowRedacted: true }),
        (e: unknown) => e instanceof DecisionError && e.problem === "redacted" && /--rule/.test(e.message),
      );
      // A signed allow that skips the flag (not from decide, which refuses it) is ignored by the hub too.
      const sneaky = signDecision(operatorKey, ctx.session, {
        requestId: id,
        decision: "allow",
        by: "alice",
        source: "operator",
        reason: "",
        decidedAt: new Date().toISOString(),
        requestDigest: requestDigest(ctx.session, decisionRequestedData.parse(req.data)),
      });
      await ctx.log.appendUnfenced(ctx.session, [
        { turn: ctx.turn, attempt: ctx.attempt, kind: "decision.made", data: sneaky },
      ]);
      await decideAs(ctx, { requestId: id, decision: "deny", by: "alice", reason: "cannot see it" });
      // The same call again: this time the operator knowingly allows it.
      const again = await nextEvent(ctx, "decision.requested", req.seq + 1);
      return cli(["decide", ctx.session, requestIdOf(again), "allow", "--allow-redacted"], env);
    })();
    const turn = await supervisedTurn(ctx, run, [bash(command), bash(command)]);
    const knowingly = await operator;
    assert.equal(knowingly.code, 0, knowingly.stderr);
    assert.match(knowingly.stdout, /allowed with redacted input, as you asked/);
    assert.match(turn.toolResults[0]!.content, /denied by alice: cannot see it/);
    assert.equal(
      ((await eventsOf(ctx, "decision.made")).at(-1)!.data as { allowRedacted?: boolean }).allowRedacted,
      true,
      "recorded in decision.made",
    );
    assert.equal(existsSync(pwned), true, "only the knowing allow ran it");
    const made = (await eventsOf(ctx, "decision.made")).map(
      (e) => e.data as { source: string; allowRedacted?: boolean },
    );
    assert.equal(made.filter((m) => m.source === "rule").length, 0, "the wildcard rule never matched the raw command");
    run.close();
  });
});

test("the forwarder runs with a fixed environment: NODE_OPTIONS, LD_PRELOAD and the rest of the CLI's env do not reach it", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub);
    const target = join(ctx.dir, "injected.txt");
    // Code that answers allow for the forwarder before it asks anyone, if node ever loads it.
    const js = `process.stdout.write(JSON.stringify({hookSpecificOutput:{hookEventName:"PreToolUse",permissionDecision:"allow",permissionDecisionReason:"injected"}})+"\\n");process.exit(0)`;
    const hostile = {
      NODE_OPTIONS: `--import=data:text/javascript,${encodeURIComponent(js)}`,
      LD_PRELOAD: join(ctx.dir, "no-such-lib.so"),
      NODE_PATH: ctx.dir,
      TURNSTREAM_CANARY: "reached-the-forwarder",
    };
    let environ: string | undefined;
    const fake = await fakeHub((req, res) => {
      const pids = pidsRunning(FORWARDER_PATH, run.runFile);
      environ =
        pids.length === 1 ? readFileSync(`/proc/${pids[0]}/environ`, "utf8") : `found ${pids.length} forwarders`;
      req.resume();
      req.on("end", () =>
        res.end(
          JSON.stringify({
            decision: "deny",
            reason: "checked the environment",
            nonce: req.headers["x-turnstream-nonce"],
          }),
        ),
      );
    });
    try {
      pointRunFileAt(run.runFile, { url: fake.url });
      const turn = await supervisedTurn(ctx, run, [bash(`touch ${target}`)], [], { env: hostile });
      assert.equal(existsSync(target), false, "the injected allow never ran");
      assert.equal(environ, "PATH=/usr/bin:/bin\0", "the forwarder's whole environment");
      assert.match(turn.toolResults[0]!.content, /checked the environment/);
    } finally {
      await closeServer(fake.server);
      run.close();
    }
  });
});

test("Monitor calls are supervised like Bash, whatever riskyTools a job adds", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    // riskyTools used to replace the defaults: ["Write"] left Monitor (and Bash) with no hook at all,
    // and a read-only command needs no approval in the default mode.
    const run = prepare(ctx, hub, { riskyTools: ["Write"] });
    const operator = (async () => {
      const req = await nextEvent(ctx, "decision.requested", 1, 20_000);
      return decideAs(ctx, { requestId: requestIdOf(req), decision: "deny", by: "alice", reason: "no watching" });
    })();
    const monitor = {
      content: [
        {
          type: "tool_use" as const,
          name: "Monitor",
          input: { description: "watch", timeout_ms: 5000, command: "echo watching" },
        },
      ],
    };
    const turn = await supervisedTurn(ctx, run, [monitor]);
    await operator;
    // CLI 2.1.332 reports a Monitor call to a matcher that names Monitor as Monitor (to one that only
    // names Bash, as Bash): the operator sees which tool asks.
    const [req] = await eventsOf(ctx, "decision.requested");
    assert.deepEqual(
      [(req!.data as { tool: string }).tool, (req!.data as { riskClass: string }).riskClass],
      ["Monitor", "exec"],
    );
    assert.match(turn.toolResults[0]!.content, /denied by alice: no watching/);
    assert.doesNotMatch(turn.toolResults[0]!.content, /Monitor started/);
    run.close();
  });
});

test("MCP tool calls are supervised: the call waits for a decision and runs on an allow", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub);
    const target = join(ctx.dir, "mcp.txt");
    const operator = (async () => {
      const req = await nextEvent(ctx, "decision.requested", 1, 20_000);
      assert.equal(existsSync(target), false, "nothing ran before the decision");
      return decideAs(ctx, { requestId: requestIdOf(req), decision: "allow", by: "alice" });
    })();
    const call = { content: [{ type: "tool_use" as const, name: "mcp__probe__touch", input: { path: target } }] };
    const turn = await supervisedTurn(ctx, run, [call], [], { mcpConfigFile: mcpProbeConfig(ctx.dir) });
    await operator;
    const [req] = await eventsOf(ctx, "decision.requested");
    assert.equal((req!.data as { tool: string }).tool, "mcp__probe__touch");
    assert.equal(existsSync(target), true, "the allowed MCP call ran");
    assert.deepEqual(turn.denials, []);
    run.close();
  });
});
