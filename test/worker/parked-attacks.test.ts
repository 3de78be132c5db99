// Attacks on parked turns, played with the real CLI, the scripted model server and an in-process
// worker. The threat model (src/decisions/README.md): only a trusted operator key can allow; anyone
// with Redis write (the `operator` role: session logs, the pending index, the wake lists) may deny
// service but must never make a supervised call run without a signed allow for exactly that call.
// Each test asserts the safe outcome: where one fails, the attack got through.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
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
  parkedRequest,
  parksOf,
  PARKING,
  requestsOf,
  say,
  snapshotEvent,
  storedEntry,
  toolInputIn,
} from "./_parked-attacks.ts";

test("parked attack: a look-alike request planted for a rewritten call does not turn the operator's allow of what it shows into an allow of what runs", async (ctx) => {
  const stage = await aclStage((ws) => ({
    responses: [{ content: [appendTo(join(ws, "benign.txt"), "benign")] }, say("after")],
  }));
  ctx.after(() => stage.dispose());
  const { space, ws, producer } = stage;
  const prefix = space.logPrefix;
  stage.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING });
  // The honest operator decides with the trusted key; the attacker has the operator role and no key.
  const operatorRedis = stage.as("operator");
  const operatorLog = createEventLog({ redis: operatorRedis, prefix });
  const attackerRedis = stage.as("operator");
  // Its own writer keeps big events inline (the blob cap is the writer's choice): the role may not
  // write blob keys, and needs none to replace a session file.
  const attackerLog = createEventLog({ redis: attackerRedis, prefix, blobCapBytes: 16 * 1024 * 1024 });

  const { session, turn } = await producer.enqueueTurn({ prompt: "append", cwd: ws, options: { supervised: true } });
  const parked = await parkedRequest(attackerRedis, prefix, session);
  const [realPark] = await parksOf(attackerLog, session);
  const [real] = await requestsOf(attackerLog, session);

  // 1. The attacker rewrites the parked call in the session file, keeping its tool-use id…
  const file = await latestSessionFile(attackerLog, attackerRedis, prefix, session);
  const rewritten = file.text
    .replaceAll(`echo benign >> ${ws}`, `echo pwned >> ${ws}`)
    .replaceAll("benign.txt", "pwned.txt");
  assert.notEqual(rewritten, file.text, "the parked call was found in the session file");
  const pwnedInput = toolInputIn(rewritten, realPark!.data.toolUseId);
  // …and plants a request for it that shows the operator exactly what the model asked (same id, same
  // shown input and subject), with the rewritten input's digest, and points the index at it.
  const lookAlike = { ...real!.data, inputDigest: inputDigestOf(pwnedInput) };
  const events = [
    snapshotEvent(turn, realPark!.attempt, rewritten, file.cliSessionId, ws),
    { turn, attempt: realPark!.attempt, kind: "decision.requested", data: lookAlike },
  ];
  const lookAlikeSeq = await forge(attackerLog, attackerRedis, session, events);
  const entry = await storedEntry(attackerRedis, prefix, session, parked.requestId);
  await putPending(attackerRedis, prefix, { ...entry, seq: lookAlikeSeq });

  // 2. The honest operator is shown the call the model asked for, and allows it.
  const decided = await decideAs(operatorLog, operatorRedis, parked, "allow", "a harmless echo");
  assert.equal(decided.request.subject, real!.data.subject, "the operator was shown the model's own call");
  // Held so far: the turn re-parks on its own request, which this allow was not signed for.
  await new Promise((resolve) => setTimeout(resolve, 2000));
  assert.equal((await metaOf(attackerRedis, prefix, session))["state"], "parked");
  assert.equal(existsSync(join(ws, "pwned.txt")), false);

  // 3. The attacker re-parks the turn on the planted request (the sweep wakes it: the log moved on).
  const forgedPark = { ...realPark!.data, requestSeq: lookAlikeSeq, inputDigest: lookAlike.inputDigest };
  await forge(attackerLog, attackerRedis, session, [
    { turn, attempt: realPark!.attempt, kind: "turn.parked", data: forgedPark },
  ]);

  // Safe: the rewritten call never runs (the turn goes on without it, or stays parked).
  const ended = await producer.waitForTurn(turn, { timeoutMs: 30_000 }).catch(() => undefined);
  assert.equal(existsSync(join(ws, "pwned.txt")), false, "the rewritten call ran on an allow of what it was not");
  assert.equal(existsSync(join(ws, "benign.txt")), false, "nor did the call the model asked for");
  if (ended === undefined) assert.equal((await metaOf(attackerRedis, prefix, session))["state"], "parked");
});

/** Appends a decision.made as anyone who may write the log can (it is an unfenced kind). */
async function forgeDecision(log: EventLog, session: string, turn: string, made: DecisionMade): Promise<void> {
  await log.appendUnfenced(session, [{ turn, attempt: 0, kind: "decision.made", data: made }]);
}

test("parked attack: a resumed run that fails after its allowed call ran does not run that call again on retry", async (ctx) => {
  const stage = await rig((ws: string) => ({
    responses: [
      { content: [appendTo(join(ws, "ran.txt"), "once")] },
      // The model is overloaded after the call ran: the attempt is retried.
      { error: { status: 529, type: "overloaded_error", message: "slow down" } },
      say("done"),
    ],
  }));
  ctx.after(() => stage.dispose());
  stage.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING, retry: { baseMs: 100, maxMs: 500 } });
  const { producer, redis, space, ws } = stage;
  const { session, turn } = await producer.enqueueTurn({ prompt: "append", cwd: ws, options: { supervised: true } });
  const request = await parkedRequest(redis, space.logPrefix, session);
  await decideAs(producer.log, redis, request, "allow", "once");
  const result = await endDecidingParks({ producer, redis, prefix: space.logPrefix }, { session, turn }, "deny", [
    request.requestId,
  ]);
  assert.equal(result.status, "finished", JSON.stringify(result.event.data));
  const abandoned = (await stage.events(session, turn)).filter((e) => e.kind === "attempt.abandoned");
  assert.ok(abandoned.length >= 1, "the resumed run failed and was retried");
  assert.deepEqual(linesOf(join(ws, "ran.txt")), ["once"], "one signed allow ran the call once");
});

test("parked attack: an allow already used cannot be replayed into a later turn, by copying it or by re-parking that turn on it", async (ctx) => {
  const stage = await aclStage((ws) => ({
    responses: [
      { content: [appendTo(join(ws, "ran.txt"), "first")] },
      say("one"),
      { content: [appendTo(join(ws, "other.txt"), "second")] },
      say("two"),
    ],
  }));
  ctx.after(() => stage.dispose());
  const { space, ws, producer, redis } = stage;
  const prefix = space.logPrefix;
  stage.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING });
  const attackerRedis = stage.as("operator");
  const attackerLog = createEventLog({ redis: attackerRedis, prefix, blobCapBytes: 16 * 1024 * 1024 });

  // Turn 1 parks on A, which the operator allows: it runs once.
  const first = await producer.enqueueTurn({ prompt: "append", cwd: ws, options: { supervised: true } });
  const { session } = first;
  const requestA = await parkedRequest(redis, prefix, session);
  await decideAs(producer.log, redis, requestA, "allow", "once");
  assert.equal((await producer.waitForTurn(first.turn, { timeoutMs: 60_000 })).status, "finished");
  assert.deepEqual(linesOf(join(ws, "ran.txt")), ["first"]);
  // Turn 2 parks on B, which nobody has decided.
  const second = await producer.enqueueTurn({ session, prompt: "append more", cwd: ws, options: { supervised: true } });
  const requestB = await parkedRequest(redis, prefix, session, [requestA.requestId]);

  // A copy of A's signed allow, re-addressed to B, is not B's allow (its signature covers the request).
  const allowA = (await decisionsOf(attackerLog, session)).find((d) => d.data.requestId === requestA.requestId)!;
  await forgeDecision(attackerLog, session, second.turn, { ...allowA.data, requestId: requestB.requestId });
  await attackerRedis.lpush(wakeKey(prefix, producer.queue.name), `${session} ${second.turn}`);
  await new Promise((resolve) => setTimeout(resolve, 2000));
  assert.equal((await metaOf(attackerRedis, prefix, session))["state"], "parked", "B is still waiting");
  assert.deepEqual(linesOf(join(ws, "other.txt")), []);

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
    snapshotEvent(second.turn, parkedAttempt, fileA.bytes.toString("utf8"), fileA.cliSessionId, ws),
    {
      turn: second.turn,
      attempt: parkedAttempt,
      kind: "turn.parked",
      data: { ...parkA!.data, attempt: parkedAttempt },
    },
  ]);

  const ended = await producer.waitForTurn(second.turn, { timeoutMs: 30_000 }).catch(() => undefined);
  assert.deepEqual(linesOf(join(ws, "ran.txt")), ["first"], "A's allow ran its call a second time");
  if (ended === undefined) assert.equal((await metaOf(attackerRedis, prefix, session))["state"], "parked");
});

/**
 * One model message: a supervised Write (which parks) and an unsupervised, pre-approved `sleep 3`
 * that the CLI runs after the Write's deferral and before it exits. So the turn spends seconds
 * between the hub's defer and turn.parked: the park window.
 */
const writeThenSleep = (ws: string) => ({
  responses: [
    {
      content: [
        { type: "tool_use" as const, name: "Write", input: { file_path: join(ws, "ran.txt"), content: "x\n" } },
        { type: "tool_use" as const, name: "Bash", input: { command: "sleep 3" } },
      ],
    },
    say("done"),
  ],
});
const SLOW_PARK = {
  supervised: true,
  unsupervisedTools: ["Bash"],
  allowedTools: ["Bash"],
  decisionDeadlineMs: 120_000,
};

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

test("parked attack: an allow recorded while the turn is parking wakes it, rather than leaving it until its deadline", async (ctx) => {
  const stage = await rig(writeThenSleep);
  ctx.after(() => stage.dispose());
  stage.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING });
  const { producer, redis, ws } = stage;
  const { session, turn } = await producer.enqueueTurn({ prompt: "write", cwd: ws, options: SLOW_PARK });
  const request = await inParkWindow(stage, session);
  const decided = await decideAs(producer.log, redis, request, "allow", "just in time");
  assert.equal(decided.applied, true);
  const result = await producer.waitForTurn(turn, { timeoutMs: 20_000 }).catch(() => undefined);
  assert.ok(result !== undefined, `the allowed turn still waits: ${await standing(stage, session)}`);
  assert.equal(result.status, "finished");
  assert.ok(existsSync(join(ws, "ran.txt")), "the allowed call ran");
});

test("parked attack: a cancel requested while the turn is parking ends it, rather than leaving it until its deadline", async (ctx) => {
  const stage = await rig(writeThenSleep);
  ctx.after(() => stage.dispose());
  // A long lease: the running attempt does not see the cancel flag by itself before the turn parks.
  stage.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING, leaseMs: 60_000 });
  const { producer, ws } = stage;
  const { session, turn } = await producer.enqueueTurn({ prompt: "write", cwd: ws, options: SLOW_PARK });
  await inParkWindow(stage, session);
  const cancelled = await producer.cancelTurn(turn, { reason: "changed my mind", by: "erin" });
  assert.equal(cancelled.outcome, "requested", "a worker holds the job: it is asked to end the turn");
  const result = await producer.waitForTurn(turn, { timeoutMs: 20_000 }).catch(() => undefined);
  assert.ok(result !== undefined, `the cancelled turn still waits: ${await standing(stage, session)}`);
  assert.equal(result.status, "cancelled");
  assert.equal(existsSync(join(ws, "ran.txt")), false);
});

/** A Bash call whose command carries a connection password: the hub's scrubber redacts it. */
const PASSWORD = "hunter2";
const withPassword = (ws: string, password: string) =>
  `echo postgres://app:${password}@db.internal/prod >> ${ws}/ran.txt`;

/** Runs a supervised turn whose one call carries a redacted password, up to its recorded request. */
async function redactedCallStage(ctx: { after(fn: () => Promise<void>): void }) {
  const stage = await rig((ws: string) => ({
    responses: [
      { content: [{ type: "tool_use" as const, name: "Bash", input: { command: withPassword(ws, PASSWORD) } }] },
      say("done"),
    ],
  }));
  ctx.after(() => stage.dispose());
  stage.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING });
  const { session, turn } = await stage.producer.enqueueTurn({
    prompt: "connect",
    cwd: stage.ws,
    options: { supervised: true },
  });
  let recorded: Awaited<ReturnType<typeof requestsOf>> = [];
  await waitUntil(
    async () => {
      recorded = await requestsOf(stage.producer.log, session);
      return recorded.length > 0;
    },
    60_000,
    "the request",
  );
  return { stage, session, turn, request: recorded[0]! };
}

test("parked attack: a call whose input was redacted does not park (its input would not come back as asked)", async (ctx) => {
  const { stage, session, turn, request } = await redactedCallStage(ctx);
  assert.deepEqual(request.data.redacted, ["connection_password"]);
  assert.equal(request.data.parkable, undefined);
  // Well past the answer window, it is still waiting in the running CLI, not parked.
  await new Promise((resolve) => setTimeout(resolve, PARKING.answerWindowMs * 5));
  const listed = (await listPending({ redis: stage.redis, prefix: stage.space.logPrefix })).find(
    (p) => p.requestId === request.data.requestId,
  );
  assert.equal(listed?.status, "pending");
  assert.deepEqual(await parksOf(stage.producer.log, session), []);
  await decideAs(stage.producer.log, stage.redis, { session, requestId: request.data.requestId }, "deny");
  assert.equal((await stage.producer.waitForTurn(turn, { timeoutMs: 60_000 })).status, "finished");
  assert.equal(existsSync(join(stage.ws, "ran.txt")), false);
});

test("parked attack: the digest recorded with a redacted call does not let a reader of the log guess the redacted secret", async (ctx) => {
  const { stage, session, turn, request } = await redactedCallStage(ctx);
  // What anyone who can read the log sees: the command with the password taken out, and a digest.
  const shown = request.data.subject!;
  assert.ok(!shown.includes(PASSWORD) && shown.includes("[REDACTED:connection_password]"), shown);
  const guessFor = (password: string) => ({ command: shown.replace("[REDACTED:connection_password]", password) });
  // The guess is built right: for the true password it is the call's exact input.
  assert.equal(inputDigestOf(guessFor(PASSWORD)), inputDigestOf({ command: withPassword(stage.ws, PASSWORD) }));
  const wordlist = ["password", "123456", "letmein", "postgres", PASSWORD, "qwerty"];
  const recovered = wordlist.find((word) => inputDigestOf(guessFor(word)) === request.data.inputDigest);
  await decideAs(stage.producer.log, stage.redis, { session, requestId: request.data.requestId }, "deny");
  await stage.producer.waitForTurn(turn, { timeoutMs: 60_000 });
  assert.equal(recovered, undefined, "the log's input digest confirms the redacted password");
});

test("parked attack: a supervised call inside a subagent never parks (the CLI would drop it), it waits for its decision", async (ctx) => {
  const stage = await rig((ws: string) => ({
    responses: [
      {
        content: [
          {
            type: "tool_use" as const,
            name: "Agent",
            input: { description: "Do it", prompt: "SUBAGENT-TASK: append.", subagent_type: "general-purpose" },
          },
        ],
      },
      { match: "SUBAGENT-TASK", content: [appendTo(join(ws, "ran.txt"), "sub")] },
      say("subagent done"),
      say("main done"),
    ],
  }));
  ctx.after(() => stage.dispose());
  stage.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING });
  const { producer, redis, space, ws } = stage;
  const { session, turn } = await producer.enqueueTurn({ prompt: "delegate", cwd: ws, options: { supervised: true } });
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
  assert.deepEqual(linesOf(join(ws, "ran.txt")), ["sub"], "the allowed call ran once, in the subagent");
});

test("parked attack: a deadline already past when the turn parks denies the call; the turn goes on without it", async (ctx) => {
  const stage = await rig((ws: string) => ({
    responses: [{ content: [appendTo(join(ws, "ran.txt"), "x")] }, say("gave up")],
  }));
  ctx.after(() => stage.dispose());
  stage.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING });
  const { producer, ws } = stage;
  const { session, turn } = await producer.enqueueTurn({
    prompt: "append",
    cwd: ws,
    options: { supervised: true, decisionDeadlineMs: 1 },
  });
  const result = await producer.waitForTurn(turn, { timeoutMs: 60_000 });
  assert.equal(result.status, "finished");
  assert.deepEqual(linesOf(join(ws, "ran.txt")), []);
  const made = await decisionsOf(producer.log, session);
  assert.deepEqual(
    made.map((m) => [m.data.decision, m.data.source]),
    [["deny", "timeout"]],
  );
});

test("parked attack: an allow signed after the request's deadline does not run the call", async (ctx) => {
  const stage = await rig((ws: string) => ({
    responses: [{ content: [appendTo(join(ws, "ran.txt"), "late")] }, say("after")],
  }));
  ctx.after(() => stage.dispose());
  const first = stage.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING });
  const { producer, redis, space, ws } = stage;
  const { session, turn } = await producer.enqueueTurn({
    prompt: "append",
    cwd: ws,
    options: { supervised: true, decisionDeadlineMs: 4000 },
  });
  const pending = await parkedRequest(redis, space.logPrefix, session);
  // No worker is up when the deadline passes, so nobody has recorded its deny yet…
  await first.close({ graceMs: 1000 });
  const [request] = await requestsOf(producer.log, session);
  const deadline = Date.parse(request!.data.expiresAt);
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now()) + 500));
  // …when an allow signed by a trusted key after the deadline is appended (decide itself refuses an
  // expired request; a signer with a late clock, or one that checked just before the deadline, does not).
  const late = signDecision(operatorKey, session, {
    requestId: pending.requestId,
    decision: "allow",
    by: "erin",
    source: "operator",
    reason: "too late",
    decidedAt: new Date().toISOString(),
    requestDigest: requestDigest(session, request!.data),
  });
  assert.ok(Date.parse(late.decidedAt) > deadline);
  await forgeDecision(producer.log, session, turn, late);
  stage.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING });
  const result = await producer.waitForTurn(turn, { timeoutMs: 60_000 });
  assert.equal(result.status, "finished");
  assert.deepEqual(linesOf(join(ws, "ran.txt")), [], "an allow signed after the deadline ran the call");
});

test("parked attack: two supervised calls in one model message: the first parks and runs once after its allow, the second is refused with a reason the model is told; neither is lost", async (ctx) => {
  const stage = await rig((ws: string) => ({
    responses: [{ content: [appendTo(join(ws, "one.txt"), "one"), appendTo(join(ws, "two.txt"), "two")] }, say("done")],
  }));
  ctx.after(() => stage.dispose());
  stage.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING });
  const { producer, redis, space, ws } = stage;
  const { session, turn } = await producer.enqueueTurn({
    prompt: "append both",
    cwd: ws,
    options: { supervised: true },
  });
  const result = await endDecidingParks({ producer, redis, prefix: space.logPrefix }, { session, turn }, "allow");
  assert.equal(result.status, "finished", JSON.stringify(result.event.data));
  assert.deepEqual([linesOf(join(ws, "one.txt")), linesOf(join(ws, "two.txt"))], [["one"], []]);
  const events = await stage.events(session, turn);
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

test("parked attack: a session file whose parked call keeps its input under another tool-use id is refused though the request was allowed", async (ctx) => {
  const stage = await rig((ws: string) => ({
    responses: [{ content: [appendTo(join(ws, "ran.txt"), "x")] }, say("after")],
  }));
  ctx.after(() => stage.dispose());
  stage.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING });
  const { producer, redis, space, ws } = stage;
  const { session, turn } = await producer.enqueueTurn({ prompt: "append", cwd: ws, options: { supervised: true } });
  const request = await parkedRequest(redis, space.logPrefix, session);
  const [park] = await parksOf(producer.log, session);
  const file = await latestSessionFile(producer.log, redis, space.logPrefix, session);
  const renamed = file.text.replaceAll(park!.data.toolUseId, "toolu_renamedRenamed01");
  assert.notEqual(renamed, file.text);
  await forge(producer.log, redis, session, [snapshotEvent(turn, park!.attempt, renamed, file.cliSessionId, ws)]);
  await decideAs(producer.log, redis, request, "allow");
  assert.equal((await producer.waitForTurn(turn, { timeoutMs: 60_000 })).status, "finished");
  assert.deepEqual(linesOf(join(ws, "ran.txt")), [], "the renamed call ran on the original's allow");
  const refusal = (await decisionsOf(producer.log, session)).find((d) => d.data.source === "hub");
  assert.match(String(refusal?.data.reason), /not the one request .* asked about/);
});

test("parked attack: a decision no trusted key signed neither hides the parked request from operators nor keeps waking its turn", async (ctx) => {
  const stage = await rig((ws: string) => ({
    responses: [{ content: [appendTo(join(ws, "ran.txt"), "x")] }, say("after")],
  }));
  ctx.after(() => stage.dispose());
  stage.worker({ operatorKeys: [OPERATOR.publicKey], parking: PARKING });
  const { producer, redis, space, ws } = stage;
  const prefix = space.logPrefix;
  const { session, turn } = await producer.enqueueTurn({ prompt: "append", cwd: ws, options: { supervised: true } });
  const request = await parkedRequest(redis, prefix, session);
  // A key the workers do not trust (a stranger's, or an operator's not yet rolled out) allows it.
  await decide(
    { log: producer.log, redis, operatorKey: stranger },
    { session, requestId: request.requestId, decision: "allow", by: "mallory" },
  );
  // Each time a worker looks at the parked turn and finds it unanswered, it notes when in the entry.
  const looks = new Set<string>();
  const until = Date.now() + 10 * PARKING.sweepMs;
  while (Date.now() < until) {
    const at = (await getPending(redis, prefix, session, request.requestId))?.parked?.at;
    if (at !== undefined) looks.add(at);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.equal((await metaOf(redis, prefix, session))["state"], "parked");
  assert.deepEqual(linesOf(join(ws, "ran.txt")), []);
  const listed = (await listPending({ redis, prefix })).find((p) => p.requestId === request.requestId);
  await decideAs(producer.log, redis, request, "deny");
  await producer.waitForTurn(turn, { timeoutMs: 60_000 });
  assert.equal(listed?.status, "parked", "the parked request is no longer listed for operators");
  assert.ok(
    looks.size <= 3,
    `the turn was woken ${looks.size} times in ${10 * PARKING.sweepMs} ms for one untrusted decision`,
  );
});
