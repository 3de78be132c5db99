// A log in today's format still replays: test/fixtures/logs/today-session.jsonl, recorded from a real
// run (record-today.ts: the real worker and CLI against the scripted model server; a plain turn, then
// supervised turns an operator allowed, denied, and allowed `always`, and one the rule decided), is
// imported through the log's own import, exported back unchanged, and replayed into read models
// whose every event fit its kind's schema.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { randomBytes } from "node:crypto";
import { connectRedis, createEventLog, exportJsonl, importFile, type Envelope } from "../../src/log/index.ts";
import {
  acceptedAttempt,
  renderTranscriptText,
  replaySession,
  type ProjectionState,
} from "../../src/projector/index.ts";

const file = join(import.meta.dirname, "..", "fixtures", "logs", "today-session.jsonl");
const text = readFileSync(file, "utf8");
const recorded = text
  .split("\n")
  .filter((l) => l !== "")
  .map((l) => JSON.parse(l) as Envelope);
const dataOfKind = (kind: string) =>
  recorded.filter((e) => e.kind === kind).map((e) => e.data as Record<string, unknown>);

async function importAndReplay(): Promise<{ state: ProjectionState; exported: string }> {
  const redis = connectRedis({ url: process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379", env: {} });
  const log = createEventLog({ redis, prefix: `tf${randomBytes(4).toString("hex")}:` });
  const session = recorded[0]!.session;
  try {
    const imported = await importFile(log, session, file);
    assert.deepEqual([imported.mode, imported.count], ["envelopes", recorded.length]);
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on("data", (c: Buffer) => chunks.push(c));
    await exportJsonl(log, session, out);
    return { state: await replaySession(log, session), exported: Buffer.concat(chunks).toString("utf8") };
  } finally {
    await log.destroy(session);
    redis.disconnect();
  }
}

test("today's log imports, exports unchanged, and replays: turns finished, transcript, decisions, nothing malformed", async () => {
  const { state, exported } = await importAndReplay();
  assert.equal(exported, text, "export gives back the recorded file");

  assert.deepEqual(state.carried.malformed, {}, "every event fits its kind's schema");
  assert.equal(state.carried.total, 0, "no unknown kinds or line types");
  assert.equal(state.gaps, 0);

  // Five turns, each finished by its first attempt, on one CLI session.
  const finished = dataOfKind("turn.finished");
  assert.equal(state.view.status, "finished");
  assert.deepEqual(
    state.view.turns.map((t) => [t.status, t.acceptedAttempt, t.errorKind]),
    Array(5).fill(["finished", 1, "ok"]),
  );
  assert.equal(state.view.cliSessionId, finished[0]!["cliSessionId"]);
  assert.equal(state.view.cwd, dataOfKind("turn.queued")[0]!["cwd"]);
  assert.equal(state.view.snapshots, 5);
  // The worker names the CLI it ran on every attempt; it matches what the CLI itself reports.
  const versions = new Set(dataOfKind("attempt.started").map((d) => d["cliVersion"]));
  assert.deepEqual([...versions], [state.view.cliVersion]);
  assert.match(String(state.view.cliVersion), /^\d+\.\d+\.\d+/);
  const cost = finished.reduce((sum, d) => Math.max(sum, d["costUsd"] as number), 0);
  assert.ok(state.view.costUsd > 0 && state.view.costUsd <= cost * 5);

  // The transcript: every prompt, and every reply the turn's result reports.
  const transcript = renderTranscriptText(state);
  for (const queued of dataOfKind("turn.queued"))
    assert.ok(transcript.includes(`User: ${queued["prompt"] as string}`), `prompt ${queued["prompt"] as string}`);
  for (const finishedData of finished)
    assert.ok(
      transcript.includes(finishedData["resultText"] as string),
      `reply ${finishedData["resultText"] as string}`,
    );
  const tools = state.transcript.turns.slice(1).map((t) => acceptedAttempt(t)!.items.find((i) => i.t === "tool"));
  assert.deepEqual(
    tools.map((i) => i?.t === "tool" && i.name),
    ["Bash", "Bash", "Bash", "Bash"],
  );

  // Decisions: the hub's requests, as the hub wrote them, answered by the operator and then the rule.
  const decisions = state.decisions;
  assert.deepEqual(decisions.pending, []);
  assert.deepEqual(
    decisions.requests.map((r) => [r.status, r.toolName, r.decision, r.by]),
    [
      ["decided", "Bash", "allow", "erin"],
      ["decided", "Bash", "deny", "erin"],
      ["decided", "Bash", "allow", "erin"],
      ["decided", "Bash", "allow", `rule:${decisions.rules[0]!.ruleId!}`],
    ],
  );
  const requested = dataOfKind("decision.requested");
  assert.deepEqual(
    decisions.requests.map((r) => [r.summary, r.deadline, r.toolUseId]),
    requested.map((q) => [q["input"], q["expiresAt"], q["toolUseId"]]),
  );
  assert.deepEqual(
    decisions.rules.map((r) => [r.tool, r.pattern, r.decision, r.by]),
    [["Bash", "Bash(touch *)", "allow", "erin"]],
  );
  const hub = decisions.outcomes.filter((o) => o.source === "hub");
  assert.deepEqual(
    hub.map((o) => [o.toolName, o.decision]),
    [
      ["Bash", "allow"],
      ["Bash", "deny"],
      ["Bash", "allow"],
      ["Bash", "allow"],
    ],
  );
  assert.ok(
    decisions.outcomes.some((o) => o.source === "permission_denials" && o.toolName === "Bash"),
    "the CLI reports the denied call too",
  );
});
