// Parked turns with the real CLI: a supervised call nobody answers within the answer window parks the
// turn (the CLI exits, the worker lets go of slot, lease and job), any worker resumes it once it is
// decided, and the deferred call runs once or is refused: by an operator's deny, at the deadline, or
// because what the resumed CLI asks about is not what was signed.
//
// The scenarios run side by side, each in a session and a workspace folder of its own: the one with
// worker processes on a fleet of its own, the one that needs no worker up on a stage of its own, the
// rest on one stage (one model server whose responses each answer only their scenario's prompt, one
// worker).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Job } from "bullmq";
import { SpanStatusCode } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { ATTEMPT_SPAN_NAME, GENAI } from "../../src/telemetry/index.ts";
import { decide, listPending, parseOperatorKeys, type PendingRequest } from "../../src/decisions/index.ts";
import { decisionMadeData, turnParkedData } from "../../src/events/index.ts";
import { sessionKeys } from "../../src/log/index.ts";
import { assembleSnapshot, snapshotData } from "../../src/worker/snapshots.ts";
import { OPERATOR, operatorKey, putRule, stranger } from "../decisions/_support.ts";
import { rig, type Rig } from "./_more.ts";
import { answering, folderOf, lookedAtSince, PARKING_WORKER, parkedRequest, scenarioPrompt } from "./_parked.ts";
import { processFleet, readAll, type TestStage } from "./_support.ts";

/** A Bash call that appends a line to `file`: how many lines it has is how many times it ran. */
const appendTo = (file: string, word: string) => ({
  content: [{ type: "tool_use" as const, name: "Bash", input: { command: `echo ${word} >> ${file}` } }],
});
const say = (text: string) => ({ content: [{ type: "text" as const, text }] });
const linesOf = (file: string): string[] =>
  existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];

async function decideAs(stage: TestStage, pending: PendingRequest, decision: "allow" | "deny", reason = "") {
  return decide(
    { log: stage.producer.log, redis: stage.redis, operatorKey, trustedKeys: parseOperatorKeys([OPERATOR.publicKey]) },
    { session: pending.session, requestId: pending.requestId, decision, by: "erin", reason },
  );
}

/** Nothing is held for the parked turn: no lease, its job delayed, the session's state `parked`. */
async function assertHoldsNothing(stage: TestStage, session: string, turn: string): Promise<void> {
  const { redis, space, producer } = stage;
  assert.equal(await redis.exists(`${space.logPrefix}{s:${session}}:lease`), 0, "no session lease");
  assert.equal(await (await Job.fromId(producer.queue, turn))!.getState(), "delayed", "the job waits out a delay");
  assert.equal(await redis.hget(sessionKeys(space.logPrefix, session).meta, "state"), "parked");
}

/** Each shared scenario's model asks for one Bash call appending `word` to ran.txt in its folder. */
const SHARED_CALLS = { deny: "x", deadline: "x", forged: "asked", rule: "ruled" } as const;
type SharedScenario = keyof typeof SHARED_CALLS;

let shared: Rig;
let exporter: InMemorySpanExporter;
let provider: BasicTracerProvider;

/** A shared scenario's supervised turn (with `jobOptions`), parked on its call. */
async function parkOne(scenario: SharedScenario, jobOptions: Record<string, unknown> = {}) {
  const dir = folderOf(shared, scenario);
  const { session, turn } = await shared.producer.enqueueTurn({
    prompt: scenarioPrompt(scenario, "append"),
    cwd: dir,
    options: { supervised: true, ...jobOptions },
  });
  return { dir, session, turn, request: await parkedRequest(shared.redis, shared.space.logPrefix, session) };
}

describe("parked", { concurrency: true }, () => {
  before(async () => {
    exporter = new InMemorySpanExporter();
    provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    shared = await rig((ws: string) => ({
      responses: Object.entries(SHARED_CALLS).map(([scenario, word]) => ({
        ...answering(scenario),
        ...appendTo(join(ws, scenario, "ran.txt"), word),
      })),
    }));
    shared.worker({ ...PARKING_WORKER, tracer: provider.getTracer("test"), concurrency: 4 });
  });

  after(async () => {
    await shared?.dispose();
    await provider?.shutdown();
  });

  test("parked: parks with nothing held, survives its worker, is decided with no worker up, and another worker resumes it; each call runs once", async (ctx) => {
    const fleet = await processFleet((ws: string) => ({
      responses: [appendTo(join(ws, "ran.txt"), "first"), appendTo(join(ws, "ran.txt"), "second"), say("both done")],
    }));
    ctx.after(() => fleet.dispose());
    const env = {
      TURNSTREAM_OPERATOR_KEYS: OPERATOR.publicKey,
      TURNSTREAM_ANSWER_WINDOW: "300ms",
      LOG_LEVEL: "info",
    };
    const first = await fleet.start("a", env);
    const { session, turn } = await fleet.producer.enqueueTurn({
      prompt: "append twice",
      cwd: fleet.ws,
      options: { supervised: true },
    });
    const request = await parkedRequest(fleet.redis, fleet.space.logPrefix, session);
    await first.waitFor(
      (l) => l["msg"] === "turn parked: waiting for an operator's decision with nothing held",
      30_000,
      "parked",
    );
    await assertHoldsNothing(fleet, session, turn);
    assert.deepEqual(linesOf(join(fleet.ws, "ran.txt")), [], "nothing ran before the decision");

    first.kill("SIGKILL");
    await first.exited;
    await decideAs(fleet, request, "allow", "fine");

    const second = await fleet.start("b", env);
    const again = await parkedRequest(fleet.redis, fleet.space.logPrefix, session, [request.requestId]);
    assert.deepEqual(linesOf(join(fleet.ws, "ran.txt")), ["first"], "the first call ran once, on the second worker");
    await decideAs(fleet, again, "allow");
    const result = await fleet.producer.waitForTurn(turn, { timeoutMs: 60_000 });
    assert.equal(result.status, "finished", JSON.stringify(result.event.data));
    assert.deepEqual(linesOf(join(fleet.ws, "ran.txt")), ["first", "second"], "each call ran exactly once");
    assert.ok(
      second.lines.some((l) => l["msg"] === "turn parked: waiting for an operator's decision with nothing held"),
    );

    const events = await readAll(fleet.producer.log, session);
    const parked = events.filter((e) => e.kind === "turn.parked").map((e) => turnParkedData.parse(e.data));
    assert.deepEqual(
      parked.map((p) => p.parks),
      [1, 2],
    );
    // Cost: the session's running total as the CLI's last result reports it, counted once over three runs.
    const results = events
      .filter((e) => e.kind === "cli.line")
      .map((e) => JSON.parse((e.data as { raw: string }).raw) as Record<string, unknown>)
      .filter((l) => l["type"] === "result");
    assert.equal(results.length, 3, "the deferring run, the resumed-and-parked run, the last run");
    const finished = events.find((e) => e.kind === "turn.finished")!.data as { costUsd: number };
    assert.ok(Math.abs(finished.costUsd - Number(results.at(-1)!["total_cost_usd"])) < 1e-9, "cost counted once");
    assert.deepEqual(await listPending({ redis: fleet.redis, prefix: fleet.space.logPrefix }), []);
  });

  test("parked: an operator's deny reaches the model with its reason, and the call never runs; the parked attempt's span is no error", async () => {
    const { dir, session, turn, request } = await parkOne("deny");
    const eightHours = 8 * 3600 * 1000;
    assert.equal(Date.parse(request.expiresAt) - Date.parse(request.requestedAt), eightHours, "the default deadline");
    await decideAs(shared, request, "deny", "not on a Friday");
    const result = await shared.producer.waitForTurn(turn, { timeoutMs: 60_000 });
    assert.equal(result.status, "finished");
    assert.deepEqual(linesOf(join(dir, "ran.txt")), []);
    const toolResult = (await shared.events(session, turn))
      .filter((e) => e.kind === "cli.line")
      .map((e) => (e.data as { raw: string }).raw)
      .find((raw) => raw.includes('"tool_result"'));
    assert.match(String(toolResult), /not on a Friday/);
    const attempts = exporter
      .getFinishedSpans()
      .filter((span) => span.name === ATTEMPT_SPAN_NAME && span.attributes["turnstream.turn"] === turn);
    const parkedSpan = attempts.find((span) => span.attributes["turnstream.attempt"] === 1)!;
    assert.ok(parkedSpan.events.some((event) => event.name === "turn.parked"));
    assert.equal(parkedSpan.status.code, SpanStatusCode.UNSET, "a parked run is no failure");
    assert.equal(parkedSpan.attributes[GENAI.errorType], undefined);
  });

  test("parked: at its deadline the request is denied, recorded, and the turn goes on without the call", async () => {
    const { dir, session, turn } = await parkOne("deadline", { decisionDeadlineMs: 2000 });
    const result = await shared.producer.waitForTurn(turn, { timeoutMs: 60_000 });
    assert.equal(result.status, "finished");
    assert.deepEqual(linesOf(join(dir, "ran.txt")), []);
    const made = (await shared.events(session, turn))
      .filter((e) => e.kind === "decision.made")
      .map((e) => decisionMadeData.parse(e.data));
    assert.equal(made.length, 1);
    assert.equal(made[0]!.decision, "deny");
    assert.equal(made[0]!.source, "timeout");
    assert.match(made[0]!.reason, /deadline/);
  });

  test("parked: a forged decision wakes nothing; a session file rewritten while parked is denied though the request was allowed", async () => {
    const { dir, session, turn, request } = await parkOne("forged");
    const { producer, redis, space } = shared;

    // A stranger's signature: appended and woken, yet the turn stays parked once a worker has looked.
    const forgedAllow = await decide(
      { log: producer.log, redis, operatorKey: stranger },
      { session, requestId: request.requestId, decision: "allow", by: "mallory" },
    );
    await lookedAtSince(redis, space.logPrefix, request, forgedAllow.seq);
    assert.equal(await redis.hget(sessionKeys(space.logPrefix, session).meta, "state"), "parked");
    assert.deepEqual(linesOf(join(dir, "ran.txt")), []);

    // Someone with write access to Redis rewrites the parked call in the session's snapshot.
    const meta = await redis.hgetall(sessionKeys(space.logPrefix, session).meta);
    const snapSeq = Number(meta["snap"]!.split("|")[0]);
    const snapshot = (await assembleSnapshot(producer.log, session, snapSeq))!;
    const forged = Buffer.from(snapshot.bytes.toString("utf8").replaceAll(`echo asked >>`, `echo forged >>`), "utf8");
    assert.notDeepEqual(forged, snapshot.bytes, "the call was found in the file");
    await producer.log.append(session, Number(meta["epoch"]), [
      {
        turn,
        attempt: Number(meta["attempt"] ?? 1),
        kind: "session.snapshot",
        data: { ...snapshotData(forged, snapshot.cliSessionId, undefined), cwd: dir },
      },
    ]);
    await decideAs(shared, request, "allow", "looks fine");
    const result = await producer.waitForTurn(turn, { timeoutMs: 60_000 });
    assert.equal(result.status, "finished");
    assert.deepEqual(linesOf(join(dir, "ran.txt")), [], "neither the signed call nor the rewritten one ran");
    const made = (await shared.events(session, turn))
      .filter((e) => e.kind === "decision.made")
      .map((e) => decisionMadeData.parse(e.data));
    const refusal = made.find((m) => m.source === "hub");
    assert.match(String(refusal?.reason), /not the one request .* asked about/);
  });

  test("parked: cancelling a parked turn ends it without a worker", async (ctx) => {
    // Its worker goes away: a stage of its own, so the other scenarios keep theirs.
    const stage = await rig((ws: string) => ({ responses: [appendTo(join(ws, "ran.txt"), "x"), say("never")] }));
    ctx.after(() => stage.dispose());
    const worker = stage.worker(PARKING_WORKER);
    const { session, turn } = await stage.producer.enqueueTurn({
      prompt: "append",
      cwd: stage.ws,
      options: { supervised: true },
    });
    await parkedRequest(stage.redis, stage.space.logPrefix, session);
    await worker.close({ graceMs: 1000 });
    const cancelled = await stage.producer.cancelTurn(turn, { reason: "changed my mind", by: "erin" });
    assert.equal(cancelled.outcome, "cancelled");
    const result = await stage.producer.waitForTurn(turn, { timeoutMs: 10_000 });
    assert.equal(result.status, "cancelled");
    assert.deepEqual(await listPending({ redis: stage.redis, prefix: stage.space.logPrefix }), []);
    assert.deepEqual(linesOf(join(stage.ws, "ran.txt")), []);
  });

  test("parked: a trust rule added later that matches wakes the turn, and the call runs once; a parked entry lost from the index is written again", async () => {
    const { dir, session, turn, request } = await parkOne("rule");
    const { redis, space, producer } = shared;

    // The index entry is lost (a failover that dropped it): a wake-up of the turn writes it again.
    await redis.hdel(`${space.logPrefix}decisions:pending`, `${session}/${request.requestId}`);
    await producer.order.promote(turn);
    const again = await parkedRequest(redis, space.logPrefix, session);
    assert.equal(again.requestId, request.requestId);

    const pattern = `Bash(echo ruled >> ${join(dir, "ran.txt")})`;
    const rule = await putRule({ redis, prefix: space.logPrefix }, pattern, "allow", "erin");
    const result = await producer.waitForTurn(turn, { timeoutMs: 30_000 });
    assert.equal(result.status, "finished");
    assert.deepEqual(linesOf(join(dir, "ran.txt")), ["ruled"]);
    const made = (await shared.events(session, turn))
      .filter((e) => e.kind === "decision.made")
      .map((e) => decisionMadeData.parse(e.data));
    assert.deepEqual(
      made.map((m) => [m.source, m.decision, m.ruleId]),
      [["rule", "allow", rule.id]],
    );
  });
});
