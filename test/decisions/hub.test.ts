// The hub and the forwarder without the CLI: the forwarder is spawned exactly as the hook runs it
// (hook input on stdin, run file as its only argument); Redis is real.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  decide,
  DecisionError,
  FORWARDER_PATH,
  listPending,
  reduceDecisions,
  foldDecisions,
  initialDecisionState,
} from "../../src/decisions/index.ts";
import {
  decideAs,
  eventsOf,
  nextEvent,
  operatorKey,
  prepare,
  startHubChild,
  waitFor,
  withHub,
  withCtx,
} from "./_support.ts";

const hookInput = (command: string, id = "toolu_test1") =>
  JSON.stringify({
    session_id: "cli-1",
    hook_event_name: "PreToolUse",
    tool_name: "Bash",
    tool_input: { command },
    tool_use_id: id,
    cwd: "/tmp",
  });

async function forward(runFile: string, stdin: string): Promise<{ code: number | null; out: any; stdout: string }> {
  const child = spawn(process.execPath, [FORWARDER_PATH, runFile], { stdio: ["pipe", "pipe", "pipe"] });
  child.stdin.end(stdin);
  let stdout = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  const code = await new Promise<number | null>((r) => child.on("close", (c) => r(c)));
  let out: any;
  try {
    out = JSON.parse(stdout);
  } catch {
    out = undefined;
  }
  return { code, out, stdout };
}

const decisionOf = (forwarded: { out: any }): [string, string] => [
  forwarded.out?.hookSpecificOutput?.permissionDecision,
  forwarded.out?.hookSpecificOutput?.permissionDecisionReason,
];

async function stub(
  handler: (req: IncomingMessage, res: ServerResponse, body: string) => void,
): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8").on("data", (c: string) => (body += c));
    req.on("end", () => handler(req, res, body));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

test("run file and settings: 0600, token only in the run file, anchored matcher, hook command with the exit 2 fallback", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub, { riskyTools: ["Read"] });
    const runInfo = JSON.parse(readFileSync(run.runFile, "utf8"));
    assert.equal(statSync(run.runFile).mode & 0o777, 0o600);
    assert.equal(statSync(run.settingsFile).mode & 0o777, 0o600);
    const settings = readFileSync(run.settingsFile, "utf8");
    assert.equal(settings.includes(runInfo.token), false);
    assert.equal(run.hookCommand.includes(runInfo.token), false);
    const hook = JSON.parse(settings).hooks.PreToolUse[0];
    // riskyTools adds to the defaults; every MCP tool is caught.
    assert.equal(hook.matcher, "^(?:Bash|Monitor|Write|Edit|MultiEdit|NotebookEdit|WebFetch|Read|mcp__.*)$");
    const re = new RegExp(hook.matcher);
    assert.deepEqual(
      ["Bash", "Write", "Read", "Monitor", "TodoWrite", "mcp__x__Write", "Writer", "Glob"].map((t) => re.test(t)),
      [true, true, true, true, false, true, false, false],
    );
    assert.match(
      hook.hooks[0].command,
      /^\/usr\/bin\/env -i PATH=\/usr\/bin:\/bin '/,
      "the forwarder starts with a fixed environment",
    );
    assert.match(hook.hooks[0].command, /\|\| \{ echo .* >&2; exit 2; \}$/);
    assert.ok(hook.hooks[0].timeout * 1000 > runInfo.timeoutMs, "the forwarder gives up before the CLI's hook timeout");
    assert.deepEqual(run.turnOptions, {
      settingsFile: run.settingsFile,
      permissionMode: "default",
      skipPermissions: false,
    });
    run.close();
    // Revoked: the same run file (re-created) no longer works.
    writeFileSync(join(ctx.dir, "old.json"), JSON.stringify(runInfo));
    assert.deepEqual(decisionOf(await forward(join(ctx.dir, "old.json"), hookInput("ls"))), [
      "deny",
      "turnstream supervised mode: denied because the decision hub answered HTTP 401",
    ]);
  });
});

test("argsFilter drops every bypass form with a warning and keeps the rest", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const warned: unknown[] = [];
    const logger = { debug() {}, info() {}, error() {}, warn: (o: object) => void warned.push(o) };
    const run = prepare(ctx, hub, { logger });
    const cleaned = run.argsFilter([
      "--dangerously-skip-permissions",
      "--model",
      "x",
      "--allow-dangerously-skip-permissions",
      "--permission-mode",
      "bypassPermissions",
      "--permission-mode=dontAsk",
      "--permission-mode",
      "acceptEdits",
      "--permission-mode=default",
      "--settings",
      "/tmp/other.json",
      "--settings=/tmp/o.json",
      "--permission-prompt-tool",
      "mcp__x",
      "--max-turns",
      "3",
    ]);
    assert.deepEqual(cleaned, ["--model", "x", "--permission-mode", "default", "--max-turns", "3"]);
    assert.equal(warned.length, 8);
    run.close();
  });
});

test("forwarder: every failure prints deny and exits 0", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub);
    const info = JSON.parse(readFileSync(run.runFile, "utf8"));
    const cases: Array<[string, (req: IncomingMessage, res: ServerResponse, body: string) => void, RegExp]> = [
      ["500", (_q, s) => s.writeHead(500).end(JSON.stringify({ decision: "allow", reason: "x" })), /HTTP 500/],
      ["empty body", (_q, s) => s.writeHead(200).end(), /not JSON/],
      ["not JSON", (_q, s) => s.writeHead(200).end("allow"), /not JSON/],
      [
        "no decision",
        (q, s) => s.writeHead(200).end(JSON.stringify({ reason: "x", nonce: q.headers["x-turnstream-nonce"] })),
        /had no decision/,
      ],
      [
        "odd decision",
        (request, response) =>
          response
            .writeHead(200)
            .end(JSON.stringify({ decision: "ask", reason: "x", nonce: request.headers["x-turnstream-nonce"] })),
        /had no decision/,
      ],
      [
        "wrong nonce",
        (_q, s) => s.writeHead(200).end(JSON.stringify({ decision: "allow", reason: "x", nonce: "abc" })),
        /malformed/,
      ],
      ["huge", (_q, s) => s.writeHead(200).end("x".repeat(200_000)), /too large/],
      [
        "cut off",
        (_request, response) => {
          response.writeHead(200, { "content-length": "100" });
          response.write("{");
          response.destroy();
        },
        /broke off|not JSON|not HTTP|could not be reached/,
      ],
    ];
    for (const [name, handler, expected] of cases) {
      const hubStub = await stub(handler);
      const runFile = join(ctx.dir, `run-${name.replace(/ /g, "-")}.json`);
      writeFileSync(runFile, JSON.stringify({ ...info, url: hubStub.url }), { mode: 0o600 });
      const forwarded = await forward(runFile, hookInput("ls"));
      hubStub.server.closeAllConnections();
      hubStub.server.close();
      assert.equal(forwarded.code, 0, name);
      const [decision, why] = decisionOf(forwarded);
      assert.equal(decision, "deny", name);
      assert.match(why, expected, name);
    }
    // Its own deadline when the hub never answers.
    const hang = await stub(() => {});
    const hangRunFile = join(ctx.dir, "run-hang.json");
    writeFileSync(hangRunFile, JSON.stringify({ ...info, url: hang.url, timeoutMs: 300 }));
    assert.match(decisionOf(await forward(hangRunFile, hookInput("ls")))[1], /no decision arrived in time/);
    hang.server.closeAllConnections();
    hang.server.close();
    // No run file, a garbage run file.
    assert.match(
      decisionOf(await forward(join(ctx.dir, "missing.json"), hookInput("ls")))[1],
      /settings could not be read/,
    );
    writeFileSync(hangRunFile, "{");
    assert.match(decisionOf(await forward(hangRunFile, hookInput("ls")))[1], /settings could not be read/);
    // The real hub refuses hook input that is not a PreToolUse call.
    assert.match(decisionOf(await forward(run.runFile, "{}"))[1], /HTTP 400/);
    assert.match(decisionOf(await forward(run.runFile, "garbage"))[1], /HTTP 400/);
    run.close();
  });
});

test("hub: a fenced (superseded) attempt gets deny; a closing hub denies and records what was waiting", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const stale = prepare(ctx, hub);
    await ctx.log.beginAttempt(ctx.session, ctx.turn);
    assert.match(
      decisionOf(await forward(stale.runFile, hookInput("ls")))[1],
      /can no longer record requests \(fenced\)/,
    );
    stale.close();
    const { epoch, attempt } = await ctx.log.beginAttempt(ctx.session, ctx.turn);
    const run = prepare(ctx, hub, { epoch, attempt });
    const waiting = forward(run.runFile, hookInput("make deploy"));
    await nextEvent(ctx, "decision.requested");
    await waitFor(async () => (hub.waiting() === 1 ? true : undefined));
    await hub.close();
    const [decision, why] = decisionOf(await waiting);
    assert.equal(decision, "deny");
    assert.match(why, /decision hub shut down/);
    const made = await eventsOf(ctx, "decision.made");
    assert.equal((made[0]!.data as { source: string }).source, "hub");
    assert.deepEqual(
      (await listPending({ redis: ctx.redis, prefix: ctx.prefix })).filter((p) => p.session === ctx.session),
      [],
    );
    run.close();
  });
});

test("decide: unknown request, second operator loses, already decided", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub);
    await assert.rejects(
      decideAs(ctx, { requestId: "dr-nope", decision: "allow", by: "x" }),
      (e: unknown) => e instanceof DecisionError && e.problem === "not_found",
    );
    const waiting = forward(run.runFile, hookInput("git push"));
    const req = await nextEvent(ctx, "decision.requested");
    const requestId = (req.data as { requestId: string }).requestId;
    // Two operators at once: both append, the first in the log wins and the hub acts on it.
    const [annOutcome, benOutcome] = await Promise.all([
      decideAs(ctx, { requestId, decision: "deny", by: "ann", reason: "no" }),
      decideAs(ctx, { requestId, decision: "allow", by: "ben" }).catch((e: unknown) => e),
    ]);
    const [decision, why] = decisionOf(await waiting);
    const winners = [annOutcome, benOutcome].filter(
      (r) => !(r instanceof Error) && (r as { applied: boolean }).applied,
    );
    assert.equal(winners.length, 1);
    const winner = (winners[0] as { decision: { decision: string; by: string } }).decision;
    assert.equal(decision, winner.decision);
    assert.match(why, new RegExp(`by ${winner.by}`));
    await assert.rejects(
      decideAs(ctx, { requestId, decision: "allow", by: "cy" }),
      (e: unknown) => e instanceof DecisionError && e.problem === "already_decided",
    );
    run.close();
  });
});

test("a worker killed while a decision is pending: listed as abandoned, decide refuses, the retried attempt asks again", async () => {
  await withCtx(async (ctx) => {
    // The "worker": a separate process holding a hub with a fast heartbeat.
    const { child, runFile } = await startHubChild(ctx);
    const waiting = forward(runFile, hookInput("rm -rf build"));
    const req = await nextEvent(ctx, "decision.requested");
    const requestId = (req.data as { requestId: string }).requestId;
    const first = await waitFor(async () =>
      (await listPending({ redis: ctx.redis, prefix: ctx.prefix })).find((p) => p.requestId === requestId),
    );
    assert.equal(first.status, "pending");
    child.kill("SIGKILL");
    // The forwarder sees the connection drop: deny.
    assert.equal(decisionOf(await waiting)[0], "deny");
    // Without a retry yet: the heartbeat lapses (3 × 100 ms) and the request shows as abandoned.
    const gone = await waitFor(async () => {
      const entry = (await listPending({ redis: ctx.redis, prefix: ctx.prefix })).find(
        (x) => x.requestId === requestId,
      );
      return entry?.status === "abandoned" ? entry : undefined;
    });
    assert.equal(gone.tool, "Bash");
    await assert.rejects(
      decideAs(ctx, { requestId, decision: "allow", by: "x" }),
      (e: unknown) => e instanceof DecisionError && e.problem === "abandoned",
    );
    // The retry: a new attempt (epoch bump) on a new worker asks again.
    const { epoch, attempt } = await ctx.log.beginAttempt(ctx.session, ctx.turn);
    await ctx.log.append(ctx.session, epoch, [{ turn: ctx.turn, attempt, kind: "attempt.started", data: null }]);
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub, { epoch, attempt });
    const again = forward(run.runFile, hookInput("rm -rf build"));
    const req2 = await nextEvent(ctx, "decision.requested", req.seq + 1);
    const id2 = (req2.data as { requestId: string }).requestId;
    const listed = await waitFor(async () =>
      (await listPending({ redis: ctx.redis, prefix: ctx.prefix })).find((p) => p.requestId === id2),
    );
    assert.equal(listed.status, "pending");
    assert.equal(listed.attempt, attempt);
    await decide({ log: ctx.log, operatorKey }, { session: ctx.session, requestId: id2, decision: "allow", by: "ops" });
    assert.equal(decisionOf(await again)[0], "allow");
    // The decision state folded from the log: the first request abandoned, the retry's decided.
    const state = foldDecisions(await eventsOf(ctx));
    assert.equal(state.requests[requestId]!.status, "abandoned");
    assert.equal(state.requests[id2]!.status, "decided");
    assert.equal(state.requests[id2]!.made?.by, "ops");
    assert.equal(reduceDecisions(initialDecisionState(), req).requests[requestId]!.status, "pending");
    run.close();
  });
});

test("--always on a Write to an absolute path: the rule names that file (//…) and decides the next identical call", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub);
    const target = join(ctx.dir, "src", "a.ts");
    const write = (id: string): string =>
      JSON.stringify({
        session_id: "cli-1",
        hook_event_name: "PreToolUse",
        tool_name: "Write",
        tool_input: { file_path: target, content: "x" },
        tool_use_id: id,
        cwd: "/tmp",
      });
    const first = forward(run.runFile, write("toolu_w1"));
    const req = await nextEvent(ctx, "decision.requested");
    const decided = await decideAs(ctx, {
      requestId: (req.data as { requestId: string }).requestId,
      decision: "allow",
      by: "dave",
      always: true,
      reason: "routine",
    });
    assert.equal(
      decided.rule?.pattern,
      `Write(/${target})`,
      "a leading // anchors at the filesystem root; a single / would mean the run's cwd",
    );
    assert.equal(decisionOf(await first)[0], "allow");
    const second = await forward(run.runFile, write("toolu_w2"));
    assert.equal(decisionOf(second)[0], "allow");
    const made = await eventsOf(ctx, "decision.made");
    assert.deepEqual(
      made.map((e) => (e.data as { source: string }).source),
      ["operator", "rule"],
    );
    run.close();
  });
});
