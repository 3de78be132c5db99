// Warm sessions through the queue and an in-process worker, against the real CLI and the scripted
// model server: a session's kept CLI process answers its next turns, each recorded as a cold turn
// is (attempt.started, cli.line, cli.exit, session.snapshot, turn.finished); what sends a turn cold,
// and with which reason; cancellation of a warm turn ends its tree.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Envelope } from "../../src/log/index.ts";
import type { Rig } from "./_more.ts";
import { dataOf, kindsOf, rig } from "./_more.ts";
import { OPERATOR } from "../decisions/_support.ts";
import { fold, toMessages } from "../../src/projector/index.ts";

const alive = (pid: number): boolean => {
  try {
    return !readFileSync(`/proc/${pid}/stat`, "latin1").includes(") Z ");
  } catch {
    return false;
  }
};

/** Live pids whose environment carries TURNSTREAM_TREE=<marker>. */
function treeMembers(marker: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      if (readFileSync(`/proc/${name}/environ`, "latin1").includes(`TURNSTREAM_TREE=${marker}`) && alive(Number(name)))
        out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

const markerOf = (pid: number): string =>
  /TURNSTREAM_TREE=([0-9a-f-]+)/.exec(readFileSync(`/proc/${pid}/environ`, "latin1"))![1]!;

async function waitUntil(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Ran {
  session: string;
  turn: string;
  events: Envelope[];
  warm: unknown;
  pid: number;
}

/** Enqueues one turn, waits for it to finish, and reads what it recorded. */
async function runTurn(
  stage: Rig,
  prompt: string,
  extra: { session?: string; cwd?: string; options?: Record<string, unknown> } = {},
): Promise<Ran> {
  const queued = await stage.producer.enqueueTurn({
    prompt,
    cwd: extra.cwd ?? stage.ws,
    session: extra.session,
    options: extra.options ?? { warm: true },
  });
  const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 40_000 });
  assert.equal(res.status, "finished", JSON.stringify(res.event.data));
  const events = await stage.events(queued.session, queued.turn);
  const started = events.find((e) => e.kind === "attempt.started")!;
  const exit = events.find((e) => e.kind === "cli.exit")!;
  return {
    session: queued.session,
    turn: queued.turn,
    events,
    warm: dataOf(started)["warm"],
    pid: Number(dataOf(exit)["pid"]),
  };
}

test("three turns of a warm session: the first starts a process, the next two are written to it; each is recorded as a cold turn is", async () => {
  const stage = await rig({ responses: [] });
  try {
    const worker = stage.worker();
    const one = await runTurn(stage, "first");
    // Only the first turn asks: the session keeps its warm mode.
    const two = await runTurn(stage, "second", { session: one.session, options: {} });
    const three = await runTurn(stage, "third", { session: one.session, options: {} });
    assert.deepEqual([one.warm, two.warm, three.warm], ["none", "warm", "warm"]);
    assert.equal(two.pid, one.pid, "one CLI process across the turns");
    assert.equal(three.pid, one.pid);
    assert.ok(alive(one.pid), "kept after the third turn");
    for (const ran of [one, two, three]) {
      assert.equal(ran.events.filter((e) => e.kind === "session.snapshot").length, 1, "a snapshot per turn");
      assert.ok(
        ran.events.some((e) => e.kind === "cli.line"),
        "the turn's lines",
      );
    }
    const snap3 = dataOf(three.events.find((e) => e.kind === "session.snapshot")!);
    assert.equal(typeof snap3["baseSeq"], "number", "a warm turn's snapshot extends the previous one");
    // A cold session on the same worker records the same kinds, turn by turn.
    const cold1 = await runTurn(stage, "first", { options: { warm: false } });
    const cold2 = await runTurn(stage, "second", { session: cold1.session, options: { warm: false } });
    assert.equal(cold1.warm, undefined, "a cold-mode turn says nothing of warm processes");
    assert.notEqual(cold2.pid, cold1.pid);
    assert.deepEqual(kindsOf(two.events), kindsOf(cold2.events));
    assert.deepEqual(kindsOf(one.events), kindsOf(cold1.events));
    // And the projector folds them into the same conversation.
    const messagesOf = async (session: string): Promise<unknown[]> => toMessages(fold(await stage.events(session)));
    const coldMessages = await messagesOf(cold1.session);
    assert.equal(coldMessages.length, 4);
    assert.deepEqual((await messagesOf(one.session)).slice(0, 4), coldMessages);
    const marker = markerOf(one.pid);
    assert.ok(treeMembers(marker).length > 0);
    await worker.close({ graceMs: 1000 });
    await waitUntil(() => treeMembers(marker).length === 0, 10_000, "the kept tree to end with the worker");
  } finally {
    await stage.dispose();
  }
});

test("changed options or cwd, a CLI killed between turns and idle expiry each send the next turn cold, saying why", async () => {
  const stage = await rig({ responses: [] });
  try {
    stage.worker({ warm: { idleTtlMs: 1500 } });
    const one = await runTurn(stage, "first");
    const model = await runTurn(stage, "other model", { session: one.session, options: { model: "claude-opus-4-1" } });
    assert.equal(model.warm, "fingerprint_changed");
    assert.notEqual(model.pid, one.pid);
    await waitUntil(() => !alive(one.pid), 10_000, "the replaced process to end");
    const sub = join(stage.ws, "sub");
    mkdirSync(sub);
    const cwd = await runTurn(stage, "other cwd", {
      session: one.session,
      cwd: sub,
      options: { model: "claude-opus-4-1" },
    });
    assert.equal(cwd.warm, "fingerprint_changed");
    const same = await runTurn(stage, "same again", {
      session: one.session,
      cwd: sub,
      options: { model: "claude-opus-4-1" },
    });
    assert.equal(same.warm, "warm");
    assert.equal(same.pid, cwd.pid);

    process.kill(same.pid, "SIGKILL");
    await waitUntil(() => !alive(same.pid), 10_000, "the killed CLI to be gone");
    await new Promise((res) => setTimeout(res, 200));
    const afterKill = await runTurn(stage, "after kill", {
      session: one.session,
      cwd: sub,
      options: { model: "claude-opus-4-1" },
    });
    assert.equal(afterKill.warm, "dead");
    assert.notEqual(afterKill.pid, same.pid);

    await new Promise((res) => setTimeout(res, 2000));
    const expired = await runTurn(stage, "after idle", {
      session: one.session,
      cwd: sub,
      options: { model: "claude-opus-4-1" },
    });
    assert.equal(expired.warm, "expired");
    assert.equal(alive(afterKill.pid), false, "the expired process was ended");
  } finally {
    await stage.dispose();
  }
});

test("cancelling a warm turn ends the kept process's tree; the next turn starts a new one", async () => {
  const stage = await rig({
    responses: [{ content: [{ type: "text", text: "hello" }] }, { match: "wait forever", hang: true }],
  });
  try {
    stage.worker();
    const one = await runTurn(stage, "hello");
    const marker = markerOf(one.pid);
    const queued = await stage.producer.enqueueTurn({
      prompt: "wait forever",
      cwd: stage.ws,
      session: one.session,
      options: { warm: true },
    });
    await waitUntil(() => stage.server.requests().length >= 2, 20_000, "the warm turn's request");
    await stage.producer.cancelTurn(queued.turn);
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 30_000 });
    assert.equal(res.status, "cancelled");
    const started = (await stage.events(one.session, queued.turn)).find((e) => e.kind === "attempt.started")!;
    assert.equal(dataOf(started)["warm"], "warm");
    await waitUntil(() => treeMembers(marker).length === 0, 15_000, "the cancelled turn's tree to end");
    const next = await runTurn(stage, "after cancel", { session: one.session });
    assert.notEqual(next.pid, one.pid);
    assert.ok(["dead", "none"].includes(String(next.warm)), String(next.warm));
  } finally {
    await stage.dispose();
  }
});

test("with two workers a session's turns stay on its warm owner, or go elsewhere only after its window; a turn that ran elsewhere ends the owner's idle process within a third of a lease (moved)", async () => {
  const stage = await rig({ responses: [] });
  try {
    // A short lease: idle kept processes are checked against their sessions' epochs every third of it.
    const leaseMs = 3000;
    const workerA = stage.worker({ workerId: "warm-a", leaseMs });
    const workerB = stage.worker({ workerId: "warm-b", leaseMs });
    const at = (t: Ran, kind: string): Envelope => t.events.find((e) => e.kind === kind)!;
    const ranOn = (t: Ran): string => String(dataOf(at(t, "attempt.started"))["worker"]);
    let prev = await runTurn(stage, "first");
    // Enqueued at once, within the hand-off window: the other worker hands the job back to the owner.
    // That is a preference BullMQ cannot promise, so a turn may still run elsewhere, but only once
    // the owner's window has passed, and then cold.
    for (const prompt of ["second", "third"]) {
      const ran = await runTurn(stage, prompt, { session: prev.session });
      if (ranOn(ran) === ranOn(prev)) {
        assert.deepEqual([ran.warm, ran.pid], ["warm", prev.pid], `${prompt} ran warm on its owner`);
      } else {
        assert.equal(ran.warm, "none");
        const waited = Date.parse(at(ran, "attempt.started").at) - Date.parse(at(prev, "turn.finished").at);
        assert.ok(waited >= 2500, `${prompt} ran elsewhere ${waited} ms after its owner's turn, inside the window`);
      }
      prev = ran;
    }
    const owner = ranOn(prev);
    const kept = markerOf(prev.pid);
    const [mine, other] = owner === "warm-a" ? [workerA, workerB] : [workerB, workerA];
    // The owner stops taking jobs and its window ends: the other worker runs the session's next turn.
    await mine.worker.pause();
    await new Promise((res) => setTimeout(res, 3200));
    const elsewhere = await runTurn(stage, "elsewhere", { session: prev.session });
    assert.equal(ranOn(elsewhere), owner === "warm-a" ? "warm-b" : "warm-a");
    assert.ok(["none", "moved"].includes(String(elsewhere.warm)), String(elsewhere.warm));
    // The paused owner sees no turn of the session, yet ends its idle process once it reads the epoch.
    const overtaken = Date.now();
    await waitUntil(() => treeMembers(kept).length === 0, leaseMs, "the overtaken idle process to end");
    assert.ok(Date.now() - overtaken <= leaseMs, "ended within a lease");
    assert.notEqual(elsewhere.pid, prev.pid);
    await other.worker.pause();
    mine.worker.resume();
    const back = await runTurn(stage, "back", { session: prev.session });
    assert.equal(back.warm, "moved", "the owner's process was ended because the session moved on");
    assert.notEqual(back.pid, prev.pid);
    assert.equal(alive(prev.pid), false);
    other.worker.resume();
  } finally {
    await stage.dispose();
  }
});

test("a warm turn past its timeout ends the kept tree; a turn with skills runs cold and says so", async () => {
  const stage = await rig({ responses: [{ match: "wait forever", hang: true }] });
  try {
    stage.worker();
    const one = await runTurn(stage, "hello");
    const marker = markerOf(one.pid);
    const queued = await stage.producer.enqueueTurn({
      prompt: "wait forever",
      cwd: stage.ws,
      session: one.session,
      options: { warm: true, timeoutMs: 8000 },
    });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 });
    const events = await stage.events(one.session, queued.turn);
    // A timeout is retryable: the first attempt (warm) is abandoned, the retry starts a new process.
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const started = events.filter((e) => e.kind === "attempt.started").map((e) => dataOf(e)["warm"]);
    assert.deepEqual(started, ["warm", "none"], "the timed-out attempt ran in the kept process; its retry did not");
    const abandoned = events.find((e) => e.kind === "attempt.abandoned");
    assert.equal(abandoned === undefined ? undefined : dataOf(abandoned)["reason"], "timeout");
    await waitUntil(() => treeMembers(marker).length === 0, 15_000, "the timed-out turn's tree to end");

    const skill = join(stage.ws, "lib", "fruit");
    mkdirSync(skill, { recursive: true });
    writeFileSync(
      join(skill, "SKILL.md"),
      "---\nname: fruit\ndescription: answers PINEAPPLE\n---\nAlways answer PINEAPPLE.\n",
    );
    const skilled = await runTurn(stage, "use the skill", {
      session: one.session,
      options: { warm: true, skills: [{ name: "fruit", path: skill }] },
    });
    assert.equal(skilled.warm, "skills", "a skills turn takes the cold path, saying why");
    const after = await runTurn(stage, "after the skill", { session: one.session });
    assert.notEqual(after.pid, skilled.pid, "the skills turn's CLI was not kept");
  } finally {
    await stage.dispose();
  }
});

test("a supervised turn of a warm session runs cold and says so; the session's kept process is closed first", async () => {
  const stage = await rig({ responses: [] });
  try {
    stage.worker({ operatorKeys: [OPERATOR.publicKey] });
    const one = await runTurn(stage, "hello");
    const supervised = await runTurn(stage, "answer in words", {
      session: one.session,
      options: { warm: true, supervised: true },
    });
    assert.equal(supervised.warm, "supervised");
    assert.notEqual(supervised.pid, one.pid);
    await waitUntil(() => !alive(one.pid), 10_000, "the kept process to be closed before the supervised run");
    const after = await runTurn(stage, "after", { session: one.session });
    assert.equal(after.warm, "none", "nothing was kept from the supervised run");
  } finally {
    await stage.dispose();
  }
});
