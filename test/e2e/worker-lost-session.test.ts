// A session whose CLI conversation cannot be restored: turn 1 runs with transcript saving off
// (CLAUDE_CODE_SKIP_PROMPT_HISTORY=1, the CLI then writes no session file), so the log has the CLI
// session id from turn.finished but no session.snapshot, and turn 2's --resume finds nothing. By
// default that fails the turn as lost_session; with onLostSession "restore" the worker starts a fresh
// CLI session and restores turn 1's transcript into it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { waitUntil } from "../worker/_support.ts";
import { cliLines, dataOf, kindsOf, rig, type Rig } from "../worker/_more.ts";

// A tuning variable a job may set only where the operator lists it by name.
const SKIP_HISTORY = { allowEnv: ["CLAUDE_CODE_SKIP_PROMPT_HISTORY"] };

async function firstTurnWithoutSnapshot(
  setup: Rig,
  onLostSession?: "restore",
): Promise<{ session: string; cliSessionId: string }> {
  const t1 = await setup.producer.enqueueTurn({
    prompt: "remember the word kumquat-marker",
    cwd: setup.ws,
    options: { env: { CLAUDE_CODE_SKIP_PROMPT_HISTORY: "1" } },
    ...(onLostSession !== undefined ? { onLostSession } : {}),
  });
  const r1 = await setup.producer.waitForTurn(t1.turn, { timeoutMs: 30000 });
  assert.equal(r1.status, "finished", JSON.stringify(r1.event.data));
  assert.equal(r1.resultText, "noted kumquat");
  assert.equal(typeof r1.cliSessionId, "string");
  const kinds = kindsOf(await setup.events(t1.session));
  assert.ok(!kinds.includes("session.snapshot"), `turn 1 left no snapshot: ${kinds.join(",")}`);
  return { session: t1.session, cliSessionId: r1.cliSessionId! };
}

test("lost session, default policy: turn 2 fails as lost_session after one attempt, no retry", async () => {
  const setup = await rig(
    {
      responses: [
        { content: [{ type: "text", text: "noted kumquat" }] },
        { content: [{ type: "text", text: "must not be asked for" }] },
      ],
    },
    SKIP_HISTORY,
  );
  try {
    setup.worker({ retry: { baseMs: 100 } });
    const firstTurn = await firstTurnWithoutSnapshot(setup);
    const t2 = await setup.producer.enqueueTurn({ session: firstTurn.session, prompt: "which word?", cwd: setup.ws });
    const r2 = await setup.producer.waitForTurn(t2.turn, { timeoutMs: 30000 });
    assert.equal(r2.status, "failed");
    assert.equal(r2.errorKind, "lost_session");
    assert.equal(r2.attempt, 1);
    assert.equal(dataOf(r2.event)["retryable"], false);
    assert.match(String((dataOf(r2.event)["error"] as { message: string }).message), /no session snapshot/);
    const ev = await setup.events(firstTurn.session, t2.turn);
    assert.deepEqual(kindsOf(ev), ["turn.queued", "attempt.started", "cli.exit", "turn.failed"]);
    const started = dataOf(ev.find((e) => e.kind === "attempt.started")!);
    assert.equal(started["resume"], firstTurn.cliSessionId, "turn 2 tried to resume turn 1's CLI session");
    assert.equal(started["snapshotSeq"], undefined);
    const result = cliLines(ev, 1).find((l) => l["type"] === "result")!;
    assert.ok(
      JSON.stringify(result["errors"]).includes(`No conversation found with session ID: ${firstTurn.cliSessionId}`),
      JSON.stringify(result),
    );
    assert.equal(setup.server.remaining(), 1, "the model was not asked for turn 2");
    // The worker pops the turn right after its terminal event is in the log.
    await waitUntil(
      async () => (await setup.producer.order.pending(firstTurn.session)).length === 0,
      5000,
      "the session's pending list to empty",
    );
  } finally {
    await setup.dispose();
  }
});

test("lost session with onLostSession restore: turn 2 runs in a fresh CLI session carrying turn 1's transcript", async () => {
  const setup = await rig(
    {
      responses: [
        { content: [{ type: "text", text: "noted kumquat" }] },
        { content: [{ type: "text", text: "the word was kumquat" }] },
      ],
    },
    SKIP_HISTORY,
  );
  try {
    setup.worker({ retry: { baseMs: 100 } });
    const firstTurn = await firstTurnWithoutSnapshot(setup, "restore");
    const t2 = await setup.producer.enqueueTurn({
      session: firstTurn.session,
      prompt: "which word did I say?",
      cwd: setup.ws,
    });
    const r2 = await setup.producer.waitForTurn(t2.turn, { timeoutMs: 30000 });
    assert.equal(r2.status, "finished", JSON.stringify(r2.event.data));
    assert.equal(r2.resultText, "the word was kumquat");
    assert.equal(r2.attempt, 2);
    assert.equal(typeof r2.cliSessionId, "string");
    assert.notEqual(r2.cliSessionId, firstTurn.cliSessionId, "a new CLI session");

    const ev = await setup.events(firstTurn.session, t2.turn);
    assert.deepEqual(kindsOf(ev), [
      "turn.queued",
      "attempt.started",
      "cli.exit",
      "attempt.abandoned",
      "attempt.started",
      "cli.exit",
      "session.snapshot",
      "session.replaced",
      "turn.finished",
    ]);
    const [a1, a2] = ev.filter((e) => e.kind === "attempt.started").map(dataOf);
    assert.equal(a1!["resume"], firstTurn.cliSessionId);
    assert.equal(a2!["resume"], undefined, "the restore does not resume");
    assert.deepEqual(dataOf(ev.find((e) => e.kind === "attempt.abandoned")!), {
      reason: "lost_session",
      attempt: 1,
      retry: true,
    });
    const replaced = dataOf(ev.find((e) => e.kind === "session.replaced")!);
    assert.deepEqual(replaced, {
      by: "worker",
      reason: "lost_session",
      turns: 1,
      previousCliSessionId: firstTurn.cliSessionId,
      cliSessionId: r2.cliSessionId,
    });
    assert.equal(dataOf(ev.find((e) => e.kind === "session.snapshot")!)["cliSessionId"], r2.cliSessionId);

    const asked = setup.server.requests().filter((q) => q.kind === "messages");
    assert.equal(asked.length, 2);
    const prompt = asked[1]!.lastUserText;
    assert.ok(prompt.includes("remember the word kumquat-marker"), "turn 1's prompt is in the new session's prompt");
    assert.ok(prompt.includes("noted kumquat"), "so is turn 1's answer");
    assert.ok(prompt.includes("which word did I say?"), "and the new message");
    assert.ok(prompt.indexOf("kumquat-marker") < prompt.indexOf("which word did I say?"));
    // The new CLI session has a snapshot now: a third turn resumes it normally.
    const t3 = await setup.producer.enqueueTurn({ session: firstTurn.session, prompt: "thanks", cwd: setup.ws });
    const r3 = await setup.producer.waitForTurn(t3.turn, { timeoutMs: 30000 });
    assert.equal(r3.status, "finished", JSON.stringify(r3.event.data));
    assert.equal(r3.cliSessionId, r2.cliSessionId);
    assert.equal(r3.attempt, 1);
  } finally {
    await setup.dispose();
  }
});
