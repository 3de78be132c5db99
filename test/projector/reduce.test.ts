// Reducers on the recorded fixture logs (real CLI lines in worker envelopes): session view,
// transcript, decision state, carried unknowns, determinism and JSON round trips.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  applyEvent,
  fold,
  initialState,
  reduceSession,
  renderTranscriptText,
  toMessages,
  type ProjectionState,
  type TranscriptItem,
} from "../../src/projector/index.ts";
import { cliFixtureNames, fixtureLog, fixtureLogNames, viaJson, wrapCli } from "./_support.ts";
import type { Envelope } from "../../src/log/index.ts";

type Obj = Record<string, unknown>;
const lineObjs = (envs: Envelope[]): Obj[] =>
  envs
    .filter((e) => e.kind === "cli.line")
    .flatMap((envelope) => {
      try {
        return [JSON.parse((envelope.data as { raw: string }).raw) as Obj];
      } catch {
        return [];
      }
    });

const allItems = (items: TranscriptItem[]): TranscriptItem[] =>
  items.flatMap((i) => (i.t === "tool" ? [i, ...allItems(i.subagent)] : [i]));

const accepted = (state: ProjectionState, turn: number) => {
  const transcriptTurn = state.transcript.turns[turn]!;
  return transcriptTurn.attempts.find((a) => a.attempt === transcriptTurn.acceptedAttempt)!;
};

test("plain reply: session view from init and result, prompt and reply in the transcript", () => {
  const envs = fixtureLog("plain-reply");
  const state = fold(envs);
  const lines = lineObjs(envs);
  const init = lines.find((o) => o["subtype"] === "init")!;
  const result = lines.find((o) => o["type"] === "result")!;
  assert.equal(state.view.id, envs[0]!.session);
  assert.equal(state.view.cliSessionId, init["session_id"]);
  assert.equal(state.view.cwd, init["cwd"]);
  assert.equal(state.view.model, init["model"]);
  assert.equal(state.view.cliVersion, "2.1.332");
  assert.equal(state.view.status, "finished");
  assert.equal(state.view.costUsd, result["total_cost_usd"]);
  assert.equal(state.view.tokens.input, (result["usage"] as Obj)["input_tokens"]);
  assert.equal(state.view.lastErrorKind, null);
  assert.equal(state.view.turns.length, 1);
  assert.equal(state.view.turns[0]!.acceptedAttempt, 1);
  assert.equal(state.view.turns[0]!.errorKind, "ok");
  const attempt = state.view.turns[0]!.attempts[0]!;
  assert.equal(attempt.exitCode, 0);
  assert.equal(attempt.results, 1);
  const prompt = (envs[0]!.data as { prompt: string }).prompt;
  const reply = lines
    .filter((o) => o["type"] === "assistant")
    .flatMap((o) => ((o["message"] as Obj)["content"] as Obj[]).map((b) => b["text"]));
  const text = renderTranscriptText(state);
  assert.ok(text.includes(`User: ${prompt}`));
  for (const part of reply) assert.ok(text.includes(String(part)));
  const msgs = toMessages(state);
  assert.deepEqual(msgs[0], { role: "user", content: prompt });
  assert.equal(msgs[1]!.role, "assistant");
});

test("resumed session: two turns on one CLI session, each costs what it added to the session's running total", () => {
  const envs = fixtureLog("resumed-session");
  const state = fold(envs);
  const results = lineObjs(envs).filter((o) => o["type"] === "result");
  assert.equal(state.view.turns.length, 2);
  assert.deepEqual(
    state.view.turns.map((t) => t.status),
    ["finished", "finished"],
  );
  const sids = state.view.turns.map((t) => t.attempts[0]!.cliSessionId);
  assert.equal(sids[0], sids[1], "the resumed turn continues the same CLI session");
  assert.equal(state.view.cliSessionId, sids[0]);
  // total_cost_usd of a resumed CLI session is its running total: the session spent the last one.
  const totals = results.map((r) => r["total_cost_usd"] as number);
  assert.ok(totals[1]! > totals[0]!, "the fixture's second result reads the running total");
  assert.ok(Math.abs(state.view.costUsd - totals.at(-1)!) < 1e-12, `${state.view.costUsd} vs ${totals.at(-1)}`);
  // Independently: the CLI's own per-result figure (model_usage_since_last_result).
  const own = results.map((result) =>
    Object.values(result["model_usage_since_last_result"] as Record<string, Obj>).reduce(
      (n, m) => n + (m["costUSD"] as number),
      0,
    ),
  );
  assert.deepEqual(
    state.view.turns.map((t) => Number(t.attempts[0]!.costUsd.toFixed(12))),
    own.map((c) => Number(c.toFixed(12))),
  );
  assert.equal(state.transcript.turns.length, 2);
  assert.ok(state.transcript.turns.every((t) => t.prompt !== null));
  assert.equal(toMessages(state).filter((m) => m.role === "user").length, 2);
});

test("crash-retried attempt: abandoned output kept apart and marked, never mixed into the accepted attempt", () => {
  const envs = fixtureLog("crash-retry");
  const state = fold(envs);
  const [t1, t2] = state.view.turns;
  assert.equal(t1!.status, "finished");
  assert.deepEqual(
    t1!.attempts.map((a) => [a.attempt, a.status, a.abandonReason]),
    [
      [1, "abandoned", "worker_crashed"],
      [2, "finished", null],
    ],
  );
  assert.equal(t1!.acceptedAttempt, 2);
  assert.equal(t1!.attempts[0]!.stderrLines, 1);
  // Attempt 2 of turn 2 began without an abandoned event: attempt 1 is superseded.
  assert.deepEqual(
    t2!.attempts.map((a) => [a.attempt, a.status, a.abandonReason]),
    [
      [1, "abandoned", "superseded"],
      [2, "finished", null],
    ],
  );
  assert.equal(t2!.attempts[0]!.signal, "SIGTERM");
  const tt = state.transcript.turns[0]!;
  assert.equal(tt.attempts[0]!.abandoned, true);
  const acc = accepted(state, 0);
  const bashCalls = allItems(acc.items).filter((i) => i.t === "tool");
  assert.equal(bashCalls.length, 1, "one Bash call in the accepted attempt, none from the abandoned one");
  assert.ok(bashCalls[0]!.t === "tool" && bashCalls[0]!.result !== null);
  const abandonedCall = allItems(tt.attempts[0]!.items).find((i) => i.t === "tool");
  assert.ok(abandonedCall !== undefined && abandonedCall.t === "tool" && abandonedCall.result === null);
  const msgs = toMessages(state);
  const calls = msgs.flatMap((m) => (m.role === "assistant" ? m.content.filter((p) => p.type === "tool-call") : []));
  assert.equal(calls.length, 1, "messages carry only the accepted attempts");
  const text = renderTranscriptText(state);
  assert.ok(text.includes("[abandoned attempt 1: worker_crashed]"));
  assert.ok(text.includes("[abandoned attempt 1: superseded]"));
  // Cost: only the attempts that printed a result cost anything here.
  assert.equal(state.view.costUsd, t1!.attempts[1]!.costUsd + t2!.attempts[1]!.costUsd);
});

test("a log written before attempt.started recorded costBaseUsd: each turn counts from where its CLI session's last finished turn left it", () => {
  const envs = fixtureLog("today-session");
  assert.ok(!envs.some((e) => e.kind === "attempt.started" && "costBaseUsd" in (e.data as Obj)), "a log from before");
  const state = fold(envs);
  const results = lineObjs(envs).filter((o) => o["type"] === "result");
  assert.equal(results.length, state.view.turns.length);
  const own = results.map((result) =>
    Object.values(result["model_usage_since_last_result"] as Record<string, Obj>).reduce(
      (n, m) => n + (m["costUSD"] as number),
      0,
    ),
  );
  state.view.turns.forEach((turn, index) =>
    assert.ok(
      Math.abs(turn.attempts[0]!.costUsd - own[index]!) < 1e-12,
      `turn ${index + 1}: ${turn.attempts[0]!.costUsd} vs ${own[index]}`,
    ),
  );
  assert.ok(Math.abs(state.view.costUsd - (results.at(-1)!["total_cost_usd"] as number)) < 1e-12);
});

test("background subagent: its work nests under the Agent call; two results in one attempt", () => {
  const envs = fixtureLog("background-subagent");
  const state = fold(envs);
  const lines = lineObjs(envs);
  const sub = lines.filter((o) => typeof o["parent_tool_use_id"] === "string");
  assert.ok(sub.length >= 1);
  const parent = sub[0]!["parent_tool_use_id"] as string;
  const acc = accepted(state, 0);
  const call = acc.items.find((i) => i.t === "tool" && i.id === parent);
  assert.ok(call !== undefined && call.t === "tool");
  assert.equal(call.name, "Agent");
  const subTexts = sub.flatMap((o) => ((o["message"] as Obj)["content"] as Obj[]).map((b) => b["text"]));
  assert.deepEqual(
    call.subagent.filter((i) => i.t === "text").map((i) => (i as { text: string }).text),
    subTexts,
  );
  // Nested, not at top level.
  for (const subText of subTexts) assert.ok(!acc.items.some((i) => i.t === "text" && i.text === subText));
  assert.ok(call.result !== null, "the launch result is paired with the call");
  const attempt = state.view.turns[0]!.attempts[0]!;
  assert.equal(attempt.results, 2);
  const results = lines.filter((o) => o["type"] === "result");
  assert.equal(attempt.costUsd, results.at(-1)!["total_cost_usd"], "cost is the process total, not a sum of results");
  const inputSum = results.reduce((n, r) => n + ((r["usage"] as Obj)["input_tokens"] as number), 0);
  assert.equal(attempt.tokens.input, inputSum);
  assert.equal(state.carried.total, 0, "every line type of the run is understood");
});

test("denials: every CLI-reported outcome and the hub's decisions; pending and abandoned requests", () => {
  const state = fold(fixtureLog("denials"));
  const decisions = state.decisions;
  const sources = new Set(decisions.outcomes.map((o) => o.source));
  assert.deepEqual([...sources].sort(), [
    "hook_response",
    "hub",
    "permission_denials",
    "permission_denied",
    "tool_result_meta",
  ]);
  const t1 = decisions.outcomes.filter((o) => o.turn === "t1");
  assert.ok(t1.some((o) => o.source === "permission_denied" && o.toolName === "Write" && o.decision === "deny"));
  assert.ok(t1.some((o) => o.source === "permission_denials" && o.toolName === "Write"));
  assert.ok(t1.some((o) => o.source === "tool_result_meta" && o.decision === "reject"));
  const hook = decisions.outcomes.find((o) => o.source === "hook_response")!;
  assert.equal(hook.decision, "deny", "the hook's JSON output said deny");
  assert.ok(
    decisions.outcomes.some((o) => o.source === "tool_result_meta" && o.by === "hook" && o.toolName === "Bash"),
  );
  // One denial per tool call and source even though result lines may repeat them.
  const keys = decisions.outcomes.map((o) => `${o.source}|${o.turn}|${o.attempt}|${o.toolUseId}|${o.requestId}`);
  assert.equal(new Set(keys).size, keys.length);
  assert.deepEqual(
    decisions.requests.map((r) => [r.requestId, r.status, r.decision]),
    [
      ["req-abandoned", "abandoned", null],
      ["req-1", "decided", "deny"],
      ["req-2", "pending", null],
    ],
  );
  assert.deepEqual(decisions.pending, ["req-2"]);
  const hub = decisions.outcomes.find((o) => o.source === "hub")!;
  assert.deepEqual([hub.requestId, hub.by, hub.toolName, hub.attempt], ["req-1", "user:ops", "Bash", 2]);
  assert.deepEqual(
    decisions.requests.find((r) => r.requestId === "req-1")?.summary,
    "echo hi",
    "the hub's shown input",
  );
  // rule.added carries a pattern and an effect: the read model's tool comes from the pattern.
  assert.deepEqual(decisions.rules, [
    {
      seq: decisions.rules[0]!.seq,
      ruleId: "r1",
      tool: "Bash",
      pattern: "Bash(rm *)",
      decision: "deny",
      by: "user:ops",
    },
  ]);
  // Unknown kinds and line types: carried, counted, not fatal.
  assert.equal(state.carried.kinds["future.kind"], 1);
  assert.equal(state.carried.lineTypes["future_line_type"], 1);
  assert.equal(state.carried.lineTypes["invalid"], 1);
  assert.equal(state.carried.total, 3);
  assert.deepEqual(
    state.carried.recent.map((r) => r.type ?? r.kind),
    ["future_line_type", "invalid", "future.kind"],
  );
  assert.equal(state.view.status, "finished");
});

test("api errors: failed turns with their kinds, last error kind", () => {
  const state = fold(fixtureLog("api-errors"));
  assert.deepEqual(
    state.view.turns.map((t) => [t.status, t.errorKind]),
    [
      ["failed", "rate_limit"],
      ["failed", "auth"],
    ],
  );
  assert.deepEqual(state.view.turns[0]!.error, { name: "CliApiError", message: "rate limited; retry later" });
  assert.equal(state.view.turns[0]!.attempts[0]!.errorKind, "rate_limit", "classified from the CLI's own result");
  assert.equal(state.view.turns[1]!.attempts[0]!.errorKind, "auth");
  assert.equal(state.view.lastErrorKind, "auth");
  assert.equal(state.view.status, "failed");
  assert.ok(allItems(accepted(state, 0).items).some((i) => i.t === "api_error"));
});

test("every raw CLI recording folds: no unknown line types, thinking never in the transcript", () => {
  for (const name of cliFixtureNames()) {
    const envs = wrapCli(name);
    const state = fold(envs);
    assert.equal(state.carried.total, 0, `${name}: ${JSON.stringify(state.carried.lineTypes)}`);
    assert.deepEqual(viaJson(state), state, `${name}: state survives JSON`);
    const thinking = lineObjs(envs).flatMap((line) =>
      line["type"] === "assistant"
        ? ((line["message"] as Obj)["content"] as Obj[]).filter((b) => b["type"] === "thinking")
        : [],
    );
    const text = renderTranscriptText(state);
    for (const block of thinking) {
      const thought = block["thinking"];
      if (typeof thought === "string" && thought.length > 0)
        assert.ok(!text.includes(thought), `${name}: thinking rendered`);
      assert.ok(
        !JSON.stringify(state.transcript).includes(JSON.stringify(thought)),
        `${name}: thinking stored in the transcript`,
      );
    }
    if (name === "thinking") assert.ok(thinking.length > 0);
    if (name === "sigterm-midstream") assert.equal(state.view.turns[0]!.attempts[0]!.errorKind, "no_result");
    if (name === "three-tools-one-message") {
      const tools = accepted(state, 0).items.filter((i) => i.t === "tool");
      assert.ok(tools.length >= 3 && tools.every((i) => i.t === "tool" && i.result !== null));
    }
    if (name === "failing-tool") {
      assert.ok(allItems(accepted(state, 0).items).some((i) => i.t === "tool" && i.result?.isError === true));
    }
  }
});

test("deterministic, JSON-serialisable, idempotent under re-delivery; reduceSession does not mutate", () => {
  for (const name of fixtureLogNames()) {
    const envs = fixtureLog(name);
    const first = fold(envs);
    const second = fold(envs);
    assert.deepEqual(first, second, name);
    assert.deepEqual(viaJson(first), first, `${name}: JSON round trip`);
    // Re-delivered events (everything again, and random earlier ones) change nothing.
    const state = initialState();
    for (const envelope of envs) {
      applyEvent(state, envelope);
      applyEvent(state, envs[Math.floor(envelope.seq / 2)]!);
      applyEvent(state, envelope);
    }
    assert.deepEqual(state, first, `${name}: duplicates ignored`);
    assert.equal(state.events, envs.length);
    assert.equal(state.gaps, 0);
    // Folding in two halves through a JSON round trip (a stored checkpoint) gives the same state.
    const mid = Math.floor(envs.length / 2);
    assert.deepEqual(
      fold(envs.slice(mid), viaJson(fold(envs.slice(0, mid)))),
      first,
      `${name}: resumable from a stored state`,
    );
    const before = viaJson(fold(envs.slice(0, mid)));
    const frozen = viaJson(before);
    reduceSession(before, envs[mid]!);
    assert.deepEqual(before, frozen);
  }
});

test("every fixture log's events fit their kinds' schemas (none counted malformed)", () => {
  for (const name of fixtureLogNames()) assert.deepEqual(fold(fixtureLog(name)).carried.malformed, {}, name);
});

test("unknown kinds and malformed data never throw", () => {
  const base = { v: 1 as const, session: "s1", turn: "t1", attempt: 1, epoch: 1, at: "2025-01-01T00:00:00.000Z" };
  const state = fold([
    { ...base, seq: 1, kind: "something.new", data: { x: 1 } },
    { ...base, seq: 2, kind: "decision.made", data: { nope: true } },
    { ...base, seq: 3, kind: "cli.exit", data: "not an object" },
    { ...base, seq: 4, kind: "cli.line", data: { raw: "[1,2,3]" } },
    { ...base, seq: 5, kind: "cli.line", data: { raw: JSON.stringify({ type: "user", message: { content: 5 } }) } },
    { ...base, seq: 7, kind: "turn.finished", data: null },
  ]);
  assert.equal(state.carried.kinds["something.new"], 1);
  assert.equal(state.carried.malformed["decision.made"], 1);
  assert.equal(state.carried.malformed["cli.exit"], 1);
  assert.equal(state.carried.lineTypes["invalid"], 1);
  assert.equal(state.gaps, 1);
  assert.equal(state.view.status, "finished");
  assert.deepEqual(viaJson(state), state);
});

test("parked turns: turn.parked parks the turn, its attempt and its request; the session is parked while a later turn waits; cancelled, the request is dropped", () => {
  const at = "2026-01-01T00:00:00.000Z";
  const base = { v: 1 as const, session: "s1", epoch: 1, at };
  const requested = {
    requestId: "dr-1",
    nonce: "n",
    tool: "Bash",
    riskClass: "exec",
    input: "rm -rf build",
    hubId: "h",
    timeoutMs: 1000,
    expiresAt: at,
    parkable: true,
  };
  const parked = {
    attempt: 1,
    requestId: "dr-1",
    requestSeq: 3,
    tool: "Bash",
    toolUseId: "toolu_1",
    inputDigest: "d",
    cliSessionId: "c",
    deadline: at,
    parks: 1,
    queue: "turns",
  };
  const state = fold([
    { ...base, seq: 1, turn: "t1", attempt: 0, kind: "turn.queued", data: { prompt: "p", cwd: "/w" } },
    { ...base, seq: 2, turn: "t1", attempt: 1, kind: "attempt.started", data: { worker: "w1", attempt: 1, cwd: "/w" } },
    { ...base, seq: 3, turn: "t1", attempt: 1, kind: "decision.requested", data: requested },
    { ...base, seq: 4, turn: "t1", attempt: 1, kind: "cli.exit", data: { code: 0, signal: null, durationMs: 5 } },
    { ...base, seq: 5, turn: "t1", attempt: 1, kind: "turn.parked", data: parked },
    { ...base, seq: 6, turn: "t2", attempt: 0, kind: "turn.queued", data: { prompt: "q", cwd: "/w" } },
  ]);
  assert.deepEqual(state.carried.malformed, {}, "the events fit their schemas");
  assert.deepEqual(
    state.view.turns.map((t) => t.status),
    ["parked", "queued"],
  );
  assert.equal(state.view.status, "parked", "the queued turn waits on the parked one");
  assert.equal(state.view.turns[0]!.attempts[0]!.status, "parked");
  assert.deepEqual(
    state.decisions.requests.map((r) => r.status),
    ["parked"],
  );
  assert.deepEqual(state.decisions.pending, ["dr-1"]);
  assert.deepEqual(viaJson(state), state);

  const cancelled = reduceSession(state, {
    ...base,
    seq: 7,
    turn: "t1",
    attempt: 1,
    kind: "turn.cancelled",
    data: { reason: "no", by: "erin" },
  });
  assert.equal(cancelled.view.turns[0]!.status, "cancelled");
  assert.equal(cancelled.view.status, "queued");
  assert.deepEqual(
    cancelled.decisions.requests.map((r) => r.status),
    ["abandoned"],
  );
  assert.deepEqual(cancelled.decisions.pending, []);
});
