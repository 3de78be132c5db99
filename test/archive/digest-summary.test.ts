// The digest's one definition and the summary row, each checked against a count made here over the events.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { logDigest, summarize } from "../../src/archive/index.ts";
import type { Envelope } from "../../src/log/index.ts";
import { loggedEvents, uniqueId } from "./_support.ts";

const ofKind = (events: readonly Envelope[], kind: string): Envelope[] => events.filter((event) => event.kind === kind);
const field = (event: Envelope, name: string): unknown => (event.data as Record<string, unknown>)[name];

describe("logDigest", () => {
  it("is SHA-256 over each envelope's JSON in seq order joined by newlines, whatever order it is given", async () => {
    const events = await loggedEvents("plain-reply", uniqueId("dg"));
    const expected = createHash("sha256")
      .update(events.map((event) => JSON.stringify(event)).join("\n"))
      .digest("hex");
    const digest = logDigest([...events].reverse());
    assert.deepEqual(digest, { count: events.length, lastSeq: events.at(-1)!.seq, sha256: expected });
    assert.deepEqual(logDigest([]), { count: 0, lastSeq: 0, sha256: createHash("sha256").digest("hex") });
  });

  it("changes when any byte of any event changes", async () => {
    const events = await loggedEvents("plain-reply", uniqueId("dg"));
    const edited = events.map((event, index) => (index === 2 ? { ...event, at: `${event.at} ` } : event));
    assert.notEqual(logDigest(edited).sha256, logDigest(events).sha256);
  });
});

describe("summarize", () => {
  it("counts turns, attempts and decisions as the events say (a supervised session of five turns)", async () => {
    const session = uniqueId("sm");
    const events = await loggedEvents("today-session", session);
    const summary = summarize(session, events);
    const made = ofKind(events, "decision.made");
    assert.equal(summary.session, session);
    assert.equal(summary.turns, new Set(ofKind(events, "turn.queued").map((event) => event.turn)).size);
    assert.equal(summary.attempts, ofKind(events, "attempt.started").length);
    assert.equal(summary.status, "finished");
    assert.equal(ofKind(events, "turn.finished").length, summary.turns);
    assert.deepEqual(summary.decisions, {
      allowed: made.filter((event) => field(event, "decision") === "allow").length,
      denied: made.filter((event) => field(event, "decision") === "deny").length,
      pending: 0,
    });
    assert.ok(summary.decisions.allowed > 0 && summary.decisions.denied > 0);
    assert.equal(summary.cwd, field(ofKind(events, "attempt.started").at(-1)!, "cwd"));
    assert.equal(summary.firstAt, events[0]!.at);
    assert.equal(summary.lastAt, events.at(-1)!.at);
    assert.equal(summary.lastSeq, events.length);
    assert.deepEqual(summary.errorKinds, {});
    assert.deepEqual(summary.labels, {});
    const results = ofKind(events, "cli.line")
      .map((event) => JSON.parse(String(field(event, "raw"))) as Record<string, unknown>)
      .filter((line) => line["type"] === "result");
    // One CLI session resumed turn after turn: its results report a running total, so the spend is the last.
    assert.equal(new Set(results.map((line) => line["session_id"])).size, 1);
    const spent = Number(results.at(-1)!["total_cost_usd"]);
    assert.ok(Math.abs(summary.costUsd - spent) < 1e-9, `${summary.costUsd} vs ${spent}`);
    const outputTokens = results.reduce(
      (sum, line) => sum + Number((line["usage"] as Record<string, unknown>)["output_tokens"]),
      0,
    );
    assert.equal(summary.tokens.output, outputTokens);
  });

  it("counts each failed turn's error kind, for the turn and for its attempt", async () => {
    const session = uniqueId("sm");
    const events = await loggedEvents("api-errors", session);
    const summary = summarize(session, events);
    const failed = ofKind(events, "turn.failed");
    assert.equal(ofKind(events, "attempt.started").length, failed.length, "one attempt per turn in this log");
    const expected: Record<string, number> = {};
    for (const event of failed) {
      const kind = String(field(event, "errorKind"));
      expected[kind] = (expected[kind] ?? 0) + 2;
    }
    assert.deepEqual(summary.errorKinds, expected);
    assert.equal(summary.status, "failed");
  });

  it("counts a pending request and denials reported by several sources once per tool call", async () => {
    const session = uniqueId("sm");
    const events = await loggedEvents("denials", session);
    const summary = summarize(session, events);
    const requested = ofKind(events, "decision.requested").map((event) => field(event, "requestId"));
    const decided = new Set(ofKind(events, "decision.made").map((event) => field(event, "requestId")));
    const abandonedAttempts = new Set(
      ofKind(events, "attempt.abandoned").map((event) => `${event.turn}:${String(field(event, "attempt"))}`),
    );
    const waiting = ofKind(events, "decision.requested").filter(
      (event) => !decided.has(field(event, "requestId")) && !abandonedAttempts.has(`${event.turn}:${event.attempt}`),
    );
    assert.ok(requested.length > 0);
    assert.equal(summary.decisions.pending, waiting.length);
    assert.equal(summary.decisions.pending, 1);
    assert.equal(summary.decisions.allowed, 0);
    // Two tool calls the CLI denied (each reported three ways), one the hub denied, one a hook denied.
    assert.equal(summary.decisions.denied, 4);
  });
});
