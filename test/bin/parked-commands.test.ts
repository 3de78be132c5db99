// A real parked turn as the commands and the read model show it: `turnstream pending` (PARKED with its
// age, the time left and the decide command; --json keeps the `parked` field), `turnstream sessions` and
// the projector's reducer (state parked, then running again and finished once decided), and
// `turnstream status` (parked turns counted with the oldest's age, never a "no worker" warning). The
// tests share one parked turn and run in order.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { PendingRequest } from "../../src/decisions/index.ts";
import { fold } from "../../src/projector/index.ts";
import type { TurnWorker } from "../../src/worker/index.ts";
import { rig, type Rig } from "../worker/_more.ts";
import { appendCall, decideParked, PARKING_WORKER, parkedRequest } from "../worker/_parked.ts";
import { onlyJson, turnstream } from "./_cli.ts";

let stage: Rig;
let worker: TurnWorker;
let parked: { session: string; turn: string; request: PendingRequest };
let env: Record<string, string>;

before(async () => {
  stage = await rig((ws: string) => ({ responses: [appendCall("PARK-ME", join(ws, "ran.txt"))] }));
  worker = stage.worker(PARKING_WORKER);
  env = { TURNSTREAM_PREFIX: stage.space.logPrefix, TURNSTREAM_QUEUE_PREFIX: stage.space.queuePrefix };
  const { session, turn } = await stage.producer.enqueueTurn({
    prompt: "PARK-ME: append a line",
    cwd: stage.ws,
    options: { supervised: true },
  });
  parked = { session, turn, request: await parkedRequest(stage.redis, stage.space.logPrefix, session) };
});

after(() => stage.dispose());

test("pending: a parked request says PARKED with its age, the time to its deadline in hours and minutes, and the decide command", async () => {
  const { session, request } = parked;
  const text = await turnstream(["pending"], env);
  assert.equal(text.code, 0, text.stderr);
  const head = new RegExp(
    `^${session} ${request.requestId} Bash \\[exec\\] PARKED \\d+s, [78]h\\d\\dm left \\(deadline ${request.expiresAt.replaceAll(".", "\\.")}\\)$`,
    "m",
  );
  assert.match(text.stdout, head);
  assert.match(text.stdout, /^ {4}command: echo ran >> .*ran\.txt$/m);
  assert.match(
    text.stdout,
    new RegExp(`^ {4}decide: {2}turnstream decide ${session} ${request.requestId} allow\\|deny$`, "m"),
  );
  assert.doesNotMatch(text.stdout, /\d{3,}s left/, "no raw seconds for a deadline hours away");

  const listed = JSON.parse((await turnstream(["pending", "--json"], env)).stdout) as PendingRequest[];
  const mine = listed.find((p) => p.requestId === request.requestId);
  assert.equal(mine?.status, "parked");
  assert.equal(mine?.parked?.queue, "turns");
  assert.equal(typeof mine?.parked?.seq, "number");
  assert.equal(mine?.parked?.decided, undefined);
});

test("sessions and the read model: the session and its turn are parked, its request parked and pending", async () => {
  const { session, turn, request } = parked;
  const state = fold(await stage.events(session));
  assert.equal(state.view.status, "parked");
  const turnView = state.view.turns.find((t) => t.id === turn)!;
  assert.equal(turnView.status, "parked");
  assert.deepEqual(
    turnView.attempts.map((a) => a.status),
    ["parked"],
  );
  assert.deepEqual(
    state.decisions.requests.map((r) => [r.requestId, r.status]),
    [[request.requestId, "parked"]],
  );
  assert.deepEqual(state.decisions.pending, [request.requestId]);

  // No projector runs here: the command folds the log with the same reducer. Its columns: session,
  // status, turns, cost, last activity, events, pending decisions, tenant.
  const listed = await turnstream(["sessions"], env);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, new RegExp(`^${session} +parked +1 +\\$\\d\\.\\d{4} .* 1 +-$`, "m"));
});

test("status: parked turns are counted with the oldest's age; with no worker they raise no warning, a waiting turn still does", async () => {
  const { turn } = parked;
  const live = await turnstream(["status", "--json"], env);
  assert.equal(live.code, 0, live.stderr);
  const report = onlyJson(live.stdout);
  assert.equal(report["parkedTurns"], 1);
  assert.equal(report["parkedDecided"], 0);
  assert.ok(Number(report["oldestParkedAgeMs"]) > 0 && Number(report["oldestParkedAgeMs"]) < 120_000);
  assert.equal(report["oldestWaitingAgeMs"], null);

  // The worker goes, and the parked turn's job is woken as a decision would wake it: it waits in the
  // queue with no worker to take it, yet it waits for its decision, not for a worker.
  await worker.close({ graceMs: 1000 });
  await stage.producer.order.promote(turn);
  const strict = await turnstream(["status", "--strict"], env);
  assert.equal(strict.code, 0, strict.stdout);
  assert.match(strict.stdout, /^queue: 1 waiting, /m, "the woken parked turn's job waits");
  assert.match(strict.stdout, /^oldest waiting turn: none$/m, "a parked turn is not a turn waiting to run");
  assert.match(strict.stdout, /^parked turns: 1, the oldest waiting \d+s for a decision/m);
  assert.match(strict.stdout, /^workers: 0$/m);
  assert.doesNotMatch(strict.stdout, /warning/);

  await stage.producer.enqueueTurn({ prompt: "plain turn", cwd: stage.ws });
  const warned = await turnstream(["status", "--json", "--strict"], env);
  assert.equal(warned.code, 3, warned.stdout);
  const both = onlyJson(warned.stdout);
  assert.match(String((both["warnings"] as string[])[0]), /^1 turn\(s\) wait to run and no worker heartbeats/);
  assert.equal(both["parkedTurns"], 1);
  assert.ok(Number(both["oldestWaitingAgeMs"]) < Number(both["oldestParkedAgeMs"]), "the oldest is the plain turn");
});

test("decided, the turn resumes on a new worker: running again, then finished, its parked attempt kept in the conversation", async () => {
  const { session, turn, request } = parked;
  worker = stage.worker(PARKING_WORKER);
  await decideParked(stage, request, "allow");
  const result = await stage.producer.waitForTurn(turn, { timeoutMs: 60_000 });
  assert.equal(result.status, "finished");
  const ran = join(stage.ws, "ran.txt");
  assert.deepEqual(existsSync(ran) ? readFileSync(ran, "utf8").trim().split("\n") : [], ["ran"]);

  const events = await stage.events(session);
  const resumedAt = events.findIndex((e) => e.kind === "attempt.started" && e.turn === turn && e.attempt === 2);
  assert.ok(resumedAt > 0, "a second attempt resumed the turn");
  const resumed = fold(events.slice(0, resumedAt + 1));
  assert.equal(resumed.view.turns.find((t) => t.id === turn)?.status, "running", "attempt.started: running again");

  const state = fold(events);
  const turnView = state.view.turns.find((t) => t.id === turn)!;
  assert.equal(turnView.status, "finished");
  assert.deepEqual(
    turnView.attempts.map((a) => a.status),
    ["parked", "finished"],
    "the parked attempt is not superseded",
  );
  // The deferred call ran in the resumed run: its result goes with the call the parked run made.
  const [first, second] = state.transcript.turns.find((t) => t.turn === turn)!.attempts;
  const call = first!.items.find((item) => item.t === "tool");
  assert.equal(call?.t === "tool" && call.result !== null && !call.result.isError, true, JSON.stringify(call));
  assert.ok(!second!.items.some((item) => item.t === "orphan_result"), "no result left without its call");
  assert.deepEqual(
    state.decisions.requests.map((r) => [r.status, r.decision]),
    [["decided", "allow"]],
  );
  assert.deepEqual(state.decisions.pending, []);
  assert.equal(onlyJson((await turnstream(["status", "--json"], env)).stdout)["parkedTurns"], 0);
});
