// Attacks on parked turns, played with the real CLI, the scripted model server and in-process workers.
// The threat model (src/decisions/README.md): only a trusted operator key can allow; anyone with Redis
// write (the `operator` role: session logs, the pending index, the wake lists) may deny service but
// must never make a supervised call run without a signed allow for exactly that call. Each test
// asserts the safe outcome: where one fails, the attack got through.
//
// The scenarios run side by side, each in a session and a workspace folder of its own: most on one
// stage (one model server whose responses each answer only their scenario's prompt, one worker), the
// two that need the `operator` role on a Redis that enforces the ACL, and the one whose worker must be
// down while its deadline passes on a stage of its own.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  decide,
  getPending,
  inputDigestOf,
  listPending,
  putPending,
  requestDigest,
  signDecision,
  wakeKey,
  type PendingRequest,
} from "../../src/decisions/index.ts";
import type { DecisionMade } from "../../src/events/index.ts";
import { createEventLog, type EventLog } from "../../src/log/index.ts";
import { assembleSnapshot } from "../../src/worker/snapshots.ts";
import { OPERATOR, operatorKey, stranger } from "../decisions/_support.ts";
import { rig, type Rig } from "./_more.ts";
import { readAll, waitUntil } from "./_support.ts";
import { answering, folderOf, lookedAtSince, PARKING, parkedRequest, scenarioPrompt } from "./_parked.ts";
import {
  aclStage,
  appendTo,
  decideAs,
  decisionsOf,
  endDecidingParks,
  forge,
  latestSessionFile,
  linesOf,
  metaOf,
  parksOf,
  requestsOf,
  say,
  snapshotEvent,
  storedEntry,
  toolInputIn,
  type AclStage,
} from "./_parked-attacks.ts";

/**
 * The shared worker's parking: the tests' answer window, and a sweep five times a second so that the
 * test counting how often an untrusted decision wakes a turn watches ten sweeps in two seconds.
 */
const SHARED_PARKING = { ...PARKING, sweepMs: 200 };

/** Appends a decision.made as anyone who may write the log can (it is an unfenced kind): its seq. */
async function forgeDecision(log: EventLog, session: string, turn: string, made: DecisionMade): Promise<number> {
  const appended = await log.appendUnfenced(session, [{ turn, attempt: 0, kind: "decision.made", data: made }]);
  return appended.lastSeq;
}

/**
 * One model message: a supervised Write (which parks) and an unsupervised, pre-approved Bash that the
 * CLI runs after the Write's deferral and before it exits, waiting for a `gate` file. So the turn stays
 * between the hub's defer and turn.parked (the park window) until the test has acted and opens the gate.
 */
const writeThenWait = (ws: string, scenario: string) => ({
  ...answering(scenario),
  content: [
    { type: "tool_use" as const, name: "Write", input: { file_path: join(ws, scenario, "ran.txt"), content: "x\n" } },
    {
      type: "tool_use" as const,
      name: "Bash",
      input: { command: `while [ ! -e ${join(ws, scenario, "gate")} ]; do sleep 0.05; done` },
    },
  ],
});
const PARK_WINDOW_OPTIONS = {
  supervised: true,
  unsupervisedTools: ["Bash"],
  allowedTools: ["Bash"],
  decisionDeadlineMs: 120_000,
};

/** A Bash call whose command carries a connection password: the hub's scrubber redacts it. */
const PASSWORD = "hunter2";
const withPassword = (dir: string, password: string) =>
  `echo postgres://app:${password}@db.internal/prod >> ${dir}/ran.txt`;

/** The shared stage's script: every scenario's responses, each answering only its own prompt. */
const sharedScript = (ws: string) => ({
  responses: [
    {
      ...answering("retry"),
      content: [
        {
          type: "tool_use" as const,
          name: "Bash",
          input: { command: `echo once >> ${join(ws, "retry", "ran.txt")} && echo retry-call-ran` },
        },
      ],
    },
    // The model is overloaded once the call ran (its output is the next request's last message): the
    // attempt is retried.
    { match: "retry-call-ran", error: { status: 529, type: "overloaded_error", message: "slow down" } },
    writeThenWait(ws, "window-allow"),
    writeThenWait(ws, "window-cancel"),
    {
      ...answering("redacted"),
      content: [
        { type: "tool_use" as const, name: "Bash", input: { command: withPassword(join(ws, "redacted"), PASSWORD) } },
      ],
    },
    {
      ...answering("delegate"),
      content: [
        {
          type: "tool_use" as const,
          name: "Agent",
          input: { description: "Do it", prompt: "SUBAGENT-TASK: append.", subagent_type: "general-purpose" },
        },
      ],
    },
    { match: "SUBAGENT-TASK", content: [appendTo(join(ws, "delegate", "ran.txt"), "sub")] },
    { ...answering("past-deadline"), content: [appendTo(join(ws, "past-deadline", "ran.txt"), "x")] },
    {
      ...answering("two-calls"),
      content: [appendTo(join(ws, "two-calls", "one.txt"), "one"), appendTo(join(ws, "two-calls", "two.txt"), "two")],
    },
    { ...answering("renamed"), content: [appendTo(join(ws, "renamed", "ran.txt"), "x")] },
    { ...answering("untrusted"), content: [appendTo(join(ws, "untrusted", "ran.txt"), "x")] },
  ],
});

/** The ACL stage's script: the look-alike and the replay scenarios. */
const aclScript = (ws: string) => ({
  responses: [
    { ...answering("lookalike"), content: [appendTo(join(ws, "lookalike", "benign.txt"), "benign")] },
    { ...answering("replay-first"), content: [appendTo(join(ws, "replay", "ran.txt"), "first")] },
    { ...answering("replay-second"), content: [appendTo(join(ws, "replay", "other.txt"), "second")] },
  ],
});

let shared: Rig;
let acl: AclStage;
let late: Rig;

describe("parked attacks", { concurrency: true }, () => {
  before(async () => {
    [shared, acl, late] = await Promise.all([
      rig(sharedScript),
      aclStage(aclScript),
      rig((ws: string) => ({ responses: [{ content: [appendTo(join(ws, "ran.txt"), "late")] }, say("after")] })),
    ]);
    shared.worker({
      operatorKeys: [OPERATOR.publicKey],
      parking: SHARED_PARKING,
      // Several scenarios' CLIs at once; quick retries for the scenario whose resumed run is retried.
      concurrency: 4,
      retry: { baseMs: 100, maxMs: 500 },
      // A long lease: a running attempt does not see a cancel flag by itself (at a renewal) before the
      // turn in the park window parks, so the cancel scenario tests what parking does with it.
      leaseMs: 60_000,
    });
    acl.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING, concurrency: 2 });
  });

  after(async () => {
    await Promise.all([shared?.dispose(), acl?.dispose(), late?.dispose()]);
  });

  test("parked attack: a look-alike request planted for a rewritten call does not turn the operator's allow of what it shows into an allow of what runs", async () => {
    const { space, producer } = acl;
    const prefix = space.logPrefix;
    const dir = folderOf(acl, "lookalike");
    // The honest operator decides with the trusted key; the attacker has the operator role and no key.
    const operatorRedis = acl.as("operator");
    const operatorLog = createEventLog({ redis: operatorRedis, prefix });
    const attackerRedis = acl.as("operator");
    // Its own writer keeps big events inline (the blob cap is the writer's choice): the role may not
    // write blob keys, and needs none to replace a session file.
    const attackerLog = createEventLog({ redis: attackerRedis, prefix, blobCapBytes: 16 * 1024 * 1024 });

    const { session, turn } = await producer.enqueueTurn({
      prompt: scenarioPrompt("lookalike", "append"),
      cwd: dir,
      options: { supervised: true },
    });
    const parked = await parkedRequest(attackerRedis, prefix, session);
    const [realPark] = await parksOf(attackerLog, session);
    const [real] = await requestsOf(attackerLog, session);

    // 1. The attacker rewrites the parked call in the session file, keeping its tool-use id…
    const file = await latestSessionFile(attackerLog, attackerRedis, prefix, session);
    const rewritten = file.text
      .replaceAll(`echo benign >> ${dir}`, `echo pwned >> ${dir}`)
      .replaceAll("benign.txt", "pwned.txt");
    assert.notEqual(rewritten, file.text, "the parked call was found in the session file");
    const pwnedInput = toolInputIn(rewritten, realPark!.data.toolUseId);
    // …and plants a request for it that shows the operator exactly what the model asked (same id, same
    // shown input and subject), with the rewritten input's digest, and points the index at it.
    const lookAlike = { ...real!.data, inputDigest: inputDigestOf(pwnedInput) };
    const events = [
      snapshotEvent(turn, realPark!.attempt, rewritten, file.cliSessionId, dir),
      { turn, attempt: realPark!.attempt, kind: "decision.requested", data: lookAlike },
    ];
    const lookAlikeSeq = await forge(attackerLog, attackerRedis, session, events);
    const entry = await storedEntry(attackerRedis, prefix, session, parked.requestId);
    await putPending(attackerRedis, prefix, { ...entry, seq: lookAlikeSeq });

    // 2. The honest operator is shown the call the model asked for, and allows it.
    const decided = await decideAs(operatorLog, operatorRedis, parked, "allow", "a harmless echo");
    assert.equal(decided.request.subject, real!.data.subject, "the operator was shown the model's own call");
    // Held once a worker has looked at the turn with that allow: it re-parks on its own request, which
    // this allow was not signed for.
    await lookedAtSince(attackerRedis, prefix, parked, decided.seq);
    assert.equal((await metaOf(attackerRedis, prefix, session))["state"], "parked");
    assert.equal(existsSync(join(dir, "pwned.txt")), false);

    // 3. The attacker re-parks the turn on the planted request (the sweep wakes it: the log moved on).
    const forgedPark = { ...realPark!.data, requestSeq: lookAlikeSeq, inputDigest: lookAlike.inputDigest };
    await forge(attackerLog, attackerRedis, session, [
      { turn, attempt: realPark!.attempt, kind: "turn.parked", data: forgedPark },
    ]);

    // Safe: the rewritten call never runs (the turn goes on without it, or stays parked).
    const ended = await producer.waitForTurn(turn, { timeoutMs: 30_000 }).catch(() => undefined);
    assert.equal(existsSync(join(dir, "pwned.txt")), false, "the rewritten call ran on an allow of what it was not");
    assert.equal(existsSync(join(dir, "benign.txt")), false, "nor did the call the model asked for");
    if (ended === undefined) assert.equal((await metaOf(attackerRedis, prefix, session))["state"], "parked");
  });

  test("parked attack: a resumed run that fails after its allowed call ran does not run that call again on retry", async () => {
    const { producer, redis, space } = shared;
    const dir = folderOf(shared, "retry");
    const { session, turn } = await producer.enqueueTurn({
      prompt: scenarioPrompt("retry", "append"),
      cwd: dir,
      options: { supervised: true },
    });
    const request = await parkedRequest(redis, space.logPrefix, session);
    await decideAs(producer.log, redis, request, "allow", "once");
    const result = await endDecidingParks({ producer, redis, prefix: space.logPrefix }, { session, turn }, "deny", [
      request.requestId,
    ]);
    assert.equal(result.status, "finished", JSON.stringify(result.event.data));
    const abandoned = (await shared.events(session, turn)).filter((e) => e.kind === "attempt.abandoned");
    assert.ok(abandoned.length >= 1, "the resumed run failed and was retried");
    assert.deepEqual(linesOf(join(dir, "ran.txt")), ["once"], "one signed allow ran the call once");
  });

  test("parked attack: an allow already used cannot be replayed into a later turn, by copying it or by re-parking that turn on it", async () => {
    const { space, producer, redis } = acl;
    const prefix = space.logPrefix;
    const dir = folderOf(acl, "replay");
    const attackerRedis = acl.as("operator");
    const attackerLog = createEventLog({ redis: attackerRedis, prefix, blobCapBytes: 16 * 1024 * 1024 });

    // Turn 1 parks on A, which the operator allows: it runs once.
    const first = await producer.enqueueTurn({
      prompt: scenarioPrompt("replay-first", "append"),
      cwd: dir,
      options: { supervised: true },
    });
    const { session } = first;
    const requestA = await parkedRequest(redis, prefix, session);
    await decideAs(producer.log, redis, requestA, "allow", "once");
    assert.equal((await producer.waitForTurn(first.turn, { timeoutMs: 60_000 })).status, "finished");
    assert.deepEqual(linesOf(join(dir, "ran.txt")), ["first"]);
    // Turn 2 parks on B, which nobody has decided.
    const second = await producer.enqueueTurn({
      session,
      prompt: scenarioPrompt("replay-second", "append more"),
      cwd: dir,
      options: { supervised: true },
    });
    const requestB = await parkedRequest(redis, prefix, session, [requestA.requestId]);

    // A copy of A's signed allow, re-addressed to B, is not B's allow (its signature covers the request).
    const allowA = (await decisionsOf(attackerLog, session)).find((d) => d.data.requestId === requestA.requestId)!;
    const copied = await forgeDecision(attackerLog, session, second.turn, {
      ...allowA.data,
      requestId: requestB.requestId,
    });
    await attackerRedis.lpush(wakeKey(prefix, producer.queue.name), `${session} ${second.turn}`);
    await lookedAtSince(attackerRedis, prefix, requestB, copied);
    assert.equal((await metaOf(attackerRedis, prefix, session))["state"], "parked", "B is still waiting");
    assert.deepEqual(linesOf(join(dir, "other.txt")), []);

    // Re-park turn 2 on A: its park-time session file as the newest, and a turn.parked naming A.
    const [parkA] = await parksOf(attackerLog, session);
    const snapshots = (await readAll(attackerLog, session)).filter((e) => e.kind === "session.snapshot");
    const fileA = (await assembleSnapshot(
      attackerLog,
      session,
      snapshots.filter((e) => e.seq < parkA!.seq).at(-1)!.seq,
    ))!;
    const parkedAttempt = Number((await metaOf(attackerRedis, prefix, session))["attempt"]);
    await forge(attackerLog, attackerRedis, session, [
      snapshotEvent(second.turn, parkedAttempt, fileA.bytes.toString("utf8"), fileA.cliSessionId, dir),
      {
        turn: second.turn,
        attempt: parkedAttempt,
        kind: "turn.parked",
        data: { ...parkA!.data, attempt: parkedAttempt },
      },
    ]);

    const ended = await producer.waitForTurn(second.turn, { timeoutMs: 30_000 }).catch(() => undefined);
    assert.deepEqual(linesOf(join(dir, "ran.txt")), ["first"], "A's allow ran its call a second time");
    if (ended === undefined) assert.equal((await metaOf(attackerRedis, prefix, session))["state"], "parked");
  });

  test("parked attack: an allow recorded while the turn is parking wakes it, rather than leaving it until its deadline", async () => {
    const { producer, redis } = shared;
    const dir = folderOf(shared, "window-allow");
    const { session, turn } = await producer.enqueueTurn({
      prompt: scenarioPrompt("window-allow", "write"),
      cwd: dir,
      options: PARK_WINDOW_OPTIONS,
    });
    try {
      const request = await inParkWindow(shared, session);
      const decided = await decideAs(producer.log, redis, request, "allow", "just in time");
      assert.equal(decided.applied, true);
    } finally {
      writeFileSync(join(dir, "gate"), "");
    }
    const result = await producer.waitForTurn(turn, { timeoutMs: 60_000 }).catch(() => undefined);
    assert.ok(result !== undefined, `the allowed turn still waits: ${await standing(shared, session)}`);
    assert.equal(result.status, "finished");
    assert.ok(existsSync(join(dir, "ran.txt")), "the allowed call ran");
  });

  test("parked attack: a cancel requested while the turn is parking ends it, rather than leaving it until its deadline", async () => {
    const { producer } = shared;
    const dir = folderOf(shared, "window-cancel");
    const { session, turn } = await producer.enqueueTurn({
      prompt: scenarioPrompt("window-cancel", "write"),
      cwd: dir,
      options: PARK_WINDOW_OPTIONS,
    });
    try {
      await inParkWindow(shared, session);
      const cancelled = await producer.cancelTurn(turn, { reason: "changed my mind", by: "erin" });
      assert.equal(cancelled.outcome, "requested", "a worker holds the job: it is asked to end the turn");
    } finally {
      writeFileSync(join(dir, "gate"), "");
    }
    const result = await producer.waitForTurn(turn, { timeoutMs: 60_000 }).catch(() => undefined);
    assert.ok(result !== undefined, `the cancelled turn still waits: ${await standing(shared, session)}`);
    assert.equal(result.status, "cancelled");
    assert.equal(existsSync(join(dir, "ran.txt")), false);
  });

  test("parked attack: a call whose input was redacted does not park (its input would not come back as asked)", async () => {
    const { session, turn, request } = await redactedCall();
    assert.deepEqual(request.data.redacted, ["connection_password"]);
    assert.equal(request.data.parkable, undefined);
    // Well past the answer window, it is still waiting in the running CLI, not parked.
    await new Promise((resolve) => setTimeout(resolve, PARKING.answerWindowMs * 5));
    const listed = (await listPending({ redis: shared.redis, prefix: shared.space.logPrefix })).find(
      (p) => p.requestId === request.data.requestId,
    );
    assert.equal(listed?.status, "pending");
    assert.deepEqual(await parksOf(shared.producer.log, session), []);
    await decideAs(shared.producer.log, shared.redis, { session, requestId: request.data.requestId }, "deny");
    assert.equal((await shared.producer.waitForTurn(turn, { timeoutMs: 60_000 })).status, "finished");
    assert.equal(existsSync(join(shared.ws, "redacted", "ran.txt")), false);
  });

  test("parked attack: the digest recorded with a redacted call does not let a reader of the log guess the redacted secret", async () => {
    const { request } = await redactedCall();
    // What anyone who can read the log sees: the command with the password taken out, and a digest.
    const shown = request.data.subject!;
    assert.ok(!shown.includes(PASSWORD) && shown.includes("[REDACTED:connection_password]"), shown);
    const guessFor = (password: string) => ({ command: shown.replace("[REDACTED:connection_password]", password) });
    // The guess is built right: for the true password it is the call's exact input.
    const dir = join(shared.ws, "redacted");
    assert.equal(inputDigestOf(guessFor(PASSWORD)), inputDigestOf({ command: withPassword(dir, PASSWORD) }));
    const wordlist = ["password", "123456", "letmein", "postgres", PASSWORD, "qwerty"];
    const recovered = wordlist.find((word) => inputDigestOf(guessFor(word)) === request.data.inputDigest);
    assert.equal(recovered, undefined, "the log's input digest confirms the redacted password");
  });

  test("parked attack: a supervised call inside a subagent never parks (the CLI would drop it), it waits for its decision", async () => {
    const { producer, redis, space } = shared;
    const dir = folderOf(shared, "delegate");
    const { session, turn } = await producer.enqueueTurn({
      prompt: scenarioPrompt("delegate", "delegate"),
      cwd: dir,
      options: { supervised: true },
    });
    let pending: PendingRequest | undefined;
    await waitUntil(
      async () => {
        pending = (await listPending({ redis, prefix: space.logPrefix })).find((p) => p.session === session);
        return pending !== undefined;
      },
      60_000,
      "the subagent's request",
    );
    await new Promise((resolve) => setTimeout(resolve, PARKING.answerWindowMs * 5));
    const [request] = await requestsOf(producer.log, session);
    assert.equal(request?.data.tool, "Bash");
    assert.equal(request?.data.parkable, undefined, "the subagent's call is not parkable");
    assert.deepEqual(await parksOf(producer.log, session), [], "the turn did not park on it");
    await decideAs(producer.log, redis, pending!, "allow");
    assert.equal((await producer.waitForTurn(turn, { timeoutMs: 60_000 })).status, "finished");
    assert.deepEqual(linesOf(join(dir, "ran.txt")), ["sub"], "the allowed call ran once, in the subagent");
  });

  test("parked attack: a deadline already past when the turn parks denies the call; the turn goes on without it", async () => {
    const { producer } = shared;
    const dir = folderOf(shared, "past-deadline");
    const { session, turn } = await producer.enqueueTurn({
      prompt: scenarioPrompt("past-deadline", "append"),
      cwd: dir,
      options: { supervised: true, decisionDeadlineMs: 1 },
    });
    const result = await producer.waitForTurn(turn, { timeoutMs: 60_000 });
    assert.equal(result.status, "finished");
    assert.deepEqual(linesOf(join(dir, "ran.txt")), []);
    const made = await decisionsOf(producer.log, session);
    assert.deepEqual(
      made.map((m) => [m.data.decision, m.data.source]),
      [["deny", "timeout"]],
    );
  });

  test("parked attack: an allow signed after the request's deadline does not run the call", async () => {
    const { producer, redis, space, ws } = late;
    const first = late.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING });
    // The deadline runs from the request: long enough for the turn to park first, whatever else the
    // machine runs meanwhile.
    const { session, turn } = await producer.enqueueTurn({
      prompt: "append",
      cwd: ws,
      options: { supervised: true, decisionDeadlineMs: 6000 },
    });
    const pending = await parkedRequest(redis, space.logPrefix, session);
    // No worker is up when the deadline passes, so nobody has recorded its deny yet…
    await first.close({ graceMs: 1000 });
    const [request] = await requestsOf(producer.log, session);
    const deadline = Date.parse(request!.data.expiresAt);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now()) + 500));
    // …when an allow signed by a trusted key after the deadline is appended (decide itself refuses an
    // expired request; a signer with a late clock, or one that checked just before the deadline, does not).
    const lateAllow = signDecision(operatorKey, session, {
      requestId: pending.requestId,
      decision: "allow",
      by: "erin",
      source: "operator",
      reason: "too late",
      decidedAt: new Date().toISOString(),
      requestDigest: requestDigest(session, request!.data),
    });
    assert.ok(Date.parse(lateAllow.decidedAt) > deadline);
    await forgeDecision(producer.log, session, turn, lateAllow);
    late.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING });
    const result = await producer.waitForTurn(turn, { timeoutMs: 60_000 });
    assert.equal(result.status, "finished");
    assert.deepEqual(linesOf(join(ws, "ran.txt")), [], "an allow signed after the deadline ran the call");
  });

  test("parked attack: two supervised calls in one model message: the first parks and runs once after its allow, the second is refused with a reason the model is told; neither is lost", async () => {
    const { producer, redis, space } = shared;
    const dir = folderOf(shared, "two-calls");
    const { session, turn } = await producer.enqueueTurn({
      prompt: scenarioPrompt("two-calls", "append both"),
      cwd: dir,
      options: { supervised: true },
    });
    const result = await endDecidingParks({ producer, redis, prefix: space.logPrefix }, { session, turn }, "allow");
    assert.equal(result.status, "finished", JSON.stringify(result.event.data));
    assert.deepEqual([linesOf(join(dir, "one.txt")), linesOf(join(dir, "two.txt"))], [["one"], []]);
    const events = await shared.events(session, turn);
    const refused = events
      .filter((e) => e.kind === "decision.made")
      .map((e) => e.data as { source: string; decision: string; reason: string })
      .filter((made) => made.source === "hub");
    assert.equal(refused.length, 1, "the second call is refused by the hub, on the record");
    assert.match(refused[0]!.reason, /already waits for an operator/);
    const toldModel = events
      .filter((e) => e.kind === "cli.line")
      .map((e) => (e.data as { raw: string }).raw)
      .some((raw) => raw.includes('"tool_result"') && raw.includes("already waits for an operator"));
    assert.ok(toldModel, "the model is told why its second call did not run");
  });

  test("parked attack: a session file whose parked call keeps its input under another tool-use id is refused though the request was allowed", async () => {
    const { producer, redis, space } = shared;
    const dir = folderOf(shared, "renamed");
    const { session, turn } = await producer.enqueueTurn({
      prompt: scenarioPrompt("renamed", "append"),
      cwd: dir,
      options: { supervised: true },
    });
    const request = await parkedRequest(redis, space.logPrefix, session);
    const [park] = await parksOf(producer.log, session);
    const file = await latestSessionFile(producer.log, redis, space.logPrefix, session);
    const renamed = file.text.replaceAll(park!.data.toolUseId, "toolu_renamedRenamed01");
    assert.notEqual(renamed, file.text);
    await forge(producer.log, redis, session, [snapshotEvent(turn, park!.attempt, renamed, file.cliSessionId, dir)]);
    await decideAs(producer.log, redis, request, "allow");
    assert.equal((await producer.waitForTurn(turn, { timeoutMs: 60_000 })).status, "finished");
    assert.deepEqual(linesOf(join(dir, "ran.txt")), [], "the renamed call ran on the original's allow");
    const refusal = (await decisionsOf(producer.log, session)).find((d) => d.data.source === "hub");
    assert.match(String(refusal?.data.reason), /not the one request .* asked about/);
  });

  test("parked attack: a decision no trusted key signed neither hides the parked request from operators nor keeps waking its turn", async () => {
    const { producer, redis, space } = shared;
    const prefix = space.logPrefix;
    const dir = folderOf(shared, "untrusted");
    const { session } = await producer.enqueueTurn({
      prompt: scenarioPrompt("untrusted", "append"),
      cwd: dir,
      options: { supervised: true },
    });
    const request = await parkedRequest(redis, prefix, session);
    // Each time a worker looks at the parked turn and finds it unanswered, it notes when in the entry.
    const looks = new Set<string>();
    const noteLook = async (): Promise<void> => {
      const at = (await getPending(redis, prefix, session, request.requestId))?.parked?.at;
      if (at !== undefined) looks.add(at);
    };
    await noteLook();
    // A key the workers do not trust (a stranger's, or an operator's not yet rolled out) allows it.
    const untrusted = await decide(
      { log: producer.log, redis, operatorKey: stranger },
      { session, requestId: request.requestId, decision: "allow", by: "mallory" },
    );
    // A worker looks at the turn with that decision, and then nothing new should wake it again.
    await lookedAtSince(redis, prefix, request, untrusted.seq);
    const sweeps = 10;
    const until = Date.now() + sweeps * SHARED_PARKING.sweepMs;
    while (Date.now() < until) {
      await noteLook();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal((await metaOf(redis, prefix, session))["state"], "parked");
    assert.deepEqual(linesOf(join(dir, "ran.txt")), []);
    const listed = (await listPending({ redis, prefix })).find((p) => p.requestId === request.requestId);
    assert.equal(listed?.status, "parked", "the parked request is no longer listed for operators");
    assert.ok(
      looks.size <= 3,
      `the turn was woken ${looks.size} times in ${sweeps} sweeps (${sweeps * SHARED_PARKING.sweepMs} ms) for one untrusted decision`,
    );
  });
});

/** The Write's request once its answer window is over and before the turn has parked on it. */
async function inParkWindow(stage: Rig, session: string) {
  let requestId: string | undefined;
  await waitUntil(
    async () => {
      const [request] = await requestsOf(stage.producer.log, session);
      if (request === undefined) return false;
      requestId = request.data.requestId;
      // The hub takes the entry out of the index when the window ends; the worker puts it back parked.
      return (await getPending(stage.redis, stage.space.logPrefix, session, requestId)) === undefined;
    },
    60_000,
    "the end of the answer window",
  );
  const state = (await metaOf(stage.redis, stage.space.logPrefix, session))["state"];
  assert.notEqual(state, "parked", "the test acts inside the park window");
  return { session, requestId: requestId! };
}

/** Where a turn that did not end stands: the session's state and its parked request's deadline. */
async function standing(stage: Rig, session: string): Promise<string> {
  const state = (await metaOf(stage.redis, stage.space.logPrefix, session))["state"];
  const parks = await parksOf(stage.producer.log, session);
  return `state ${state}, parked ${parks.length} time(s), until ${parks.at(-1)?.data.deadline ?? "-"}`;
}

type RecordedRequest = Awaited<ReturnType<typeof requestsOf>>[number];
let redactedTurn: Promise<{ session: string; turn: string; request: RecordedRequest }> | undefined;

/**
 * The supervised turn whose one call carries a redacted password, up to its recorded request: started
 * by the first test that asks, read by both (the one that checks it does not park also ends it).
 */
function redactedCall() {
  redactedTurn ??= (async () => {
    const { producer } = shared;
    const { session, turn } = await producer.enqueueTurn({
      prompt: scenarioPrompt("redacted", "connect"),
      cwd: folderOf(shared, "redacted"),
      options: { supervised: true },
    });
    let recorded: RecordedRequest[] = [];
    await waitUntil(
      async () => {
        recorded = await requestsOf(producer.log, session);
        return recorded.length > 0;
      },
      60_000,
      "the request",
    );
    return { session, turn, request: recorded[0]! };
  })();
  return redactedTurn;
}
