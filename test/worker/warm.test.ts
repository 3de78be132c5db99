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
  r: Rig,
  prompt: string,
  extra: { session?: string; cwd?: string; options?: Record<string, unknown> } = {},
): Promise<Ran> {
  const t = await r.producer.enqueueTurn({
    prompt,
    cwd: extra.cwd ?? r.ws,
    session: extra.session,
    options: extra.options ?? { warm: true },
  });
  const res = await r.producer.waitForTurn(t.turn, { timeoutMs: 40_000 });
  assert.equal(res.status, "finished", JSON.stringify(res.event.data));
  const events = await r.events(t.session, t.turn);
  const started = events.find((e) => e.kind === "attempt.started")!;
  const exit = events.find((e) => e.kind === "cli.exit")!;
  return { session: t.session, turn: t.turn, events, warm: dataOf(started)["warm"], pid: Number(dataOf(exit)["pid"]) };
}

test("three turns of a warm session: the first starts a process, the next two are written to it; each is recorded as a cold turn is", async () => {
  const r = await rig({ responses: [] });
  try {
    const w = r.worker();
    const one = await runTurn(r, "first");
    // Only the first turn asks: the session keeps its warm mode.
    const two = await runTurn(r, "second", { session: one.session, options: {} });
    const three = await runTurn(r, "third", { session: one.session, options: {} });
    assert.deepEqual([one.warm, two.warm, three.warm], ["none", "warm", "warm"]);
    assert.equal(two.pid, one.pid, "one CLI process across the turns");
    assert.equal(three.pid, one.pid);
    assert.ok(alive(one.pid), "kept after the third turn");
    for (const t of [one, two, three]) {
      assert.equal(t.events.filter((e) => e.kind === "session.snapshot").length, 1, "a snapshot per turn");
      assert.ok(
        t.events.some((e) => e.kind === "cli.line"),
        "the turn's lines",
      );
    }
    const snap3 = dataOf(three.events.find((e) => e.kind === "session.snapshot")!);
    assert.equal(typeof snap3["baseSeq"], "number", "a warm turn's snapshot extends the previous one");
    // A cold session on the same worker records the same kinds, turn by turn.
    const cold1 = await runTurn(r, "first", { options: { warm: false } });
    const cold2 = await runTurn(r, "second", { session: cold1.session, options: { warm: false } });
    assert.equal(cold1.warm, undefined, "a cold-mode turn says nothing of warm processes");
    assert.notEqual(cold2.pid, cold1.pid);
    assert.deepEqual(kindsOf(two.events), kindsOf(cold2.events));
    assert.deepEqual(kindsOf(one.events), kindsOf(cold1.events));
    // And the projector folds them into the same conversation.
    const messagesOf = async (session: string): Promise<unknown[]> => toMessages(fold(await r.events(session)));
    const coldMessages = await messagesOf(cold1.session);
    assert.equal(coldMessages.length, 4);
    assert.deepEqual((await messagesOf(one.session)).slice(0, 4), coldMessages);
    const marker = markerOf(one.pid);
    assert.ok(treeMembers(marker).length > 0);
    await w.close({ graceMs: 1000 });
    await waitUntil(() => treeMembers(marker).length === 0, 10_000, "the kept tree to end with the worker");
  } finally {
    await r.dispose();
  }
});

test("changed options or cwd, a CLI killed between turns and idle expiry each send the next turn cold, saying why", async () => {
  const r = await rig({ responses: [] });
  try {
    r.worker({ warm: { idleTtlMs: 1500 } });
    const one = await runTurn(r, "first");
    const model = await runTurn(r, "other model", { session: one.session, options: { model: "claude-opus-4-1" } });
    assert.equal(model.warm, "fingerprint_changed");
    assert.notEqual(model.pid, one.pid);
    await waitUntil(() => !alive(one.pid), 10_000, "the replaced process to end");
    const sub = join(r.ws, "sub");
    mkdirSync(sub);
    const cwd = await runTurn(r, "other cwd", {
      session: one.session,
      cwd: sub,
      options: { model: "claude-opus-4-1" },
    });
    assert.equal(cwd.warm, "fingerprint_changed");
    const same = await runTurn(r, "same again", {
      session: one.session,
      cwd: sub,
      options: { model: "claude-opus-4-1" },
    });
    assert.equal(same.warm, "warm");
    assert.equal(same.pid, cwd.pid);

    process.kill(same.pid, "SIGKILL");
    await waitUntil(() => !alive(same.pid), 10_000, "the killed CLI to be gone");
    await new Promise((res) => setTimeout(res, 200));
    const afterKill = await runTurn(r, "after kill", {
      session: one.session,
      cwd: sub,
      options: { model: "claude-opus-4-1" },
    });
    assert.equal(afterKill.warm, "dead");
    assert.notEqual(afterKill.pid, same.pid);

    await new Promise((res) => setTimeout(res, 2000));
    const expired = await runTurn(r, "after idle", {
      session: one.session,
      cwd: sub,
      options: { model: "claude-opus-4-1" },
    });
    assert.equal(expired.warm, "expired");
    assert.equal(alive(afterKill.pid), false, "the expired process was ended");
  } finally {
    await r.dispose();
  }
});

test("cancelling a warm turn ends the kept process's tree; the next turn starts a new one", async () => {
  const r = await rig({
    responses: [{ content: [{ type: "text", text: "hello" }] }, { match: "wait forever", hang: true }],
  });
  try {
    r.worker();
    const one = await runTurn(r, "hello");
    const marker = markerOf(one.pid);
    const t = await r.producer.enqueueTurn({
      prompt: "wait forever",
      cwd: r.ws,
      session: one.session,
      options: { warm: true },
    });
    await waitUntil(() => r.server.requests().length >= 2, 20_000, "the warm turn's request");
    await r.producer.cancelTurn(t.turn);
    const res = await r.producer.waitForTurn(t.turn, { timeoutMs: 30_000 });
    assert.equal(res.status, "cancelled");
    const started = (await r.events(one.session, t.turn)).find((e) => e.kind === "attempt.started")!;
    assert.equal(dataOf(started)["warm"], "warm");
    await waitUntil(() => treeMembers(marker).length === 0, 15_000, "the cancelled turn's tree to end");
    const next = await runTurn(r, "after cancel", { session: one.session });
    assert.notEqual(next.pid, one.pid);
    assert.ok(["dead", "none"].includes(String(next.warm)), String(next.warm));
  } finally {
    await r.dispose();
  }
});

test("with two workers a session's turns stay on its warm owner, or go elsewhere only after its window; a turn that ran elsewhere ends the owner's idle process within a third of a lease (moved)", async () => {
  const r = await rig({ responses: [] });
  try {
    // A short lease: idle kept processes are checked against their sessions' epochs every third of it.
    const leaseMs = 3000;
    const a = r.worker({ workerId: "warm-a", leaseMs });
    const b = r.worker({ workerId: "warm-b", leaseMs });
    const at = (t: Ran, kind: string): Envelope => t.events.find((e) => e.kind === kind)!;
    const ranOn = (t: Ran): string => String(dataOf(at(t, "attempt.started"))["worker"]);
    let prev = await runTurn(r, "first");
    // Enqueued at once, within the hand-off window: the other worker hands the job back to the owner.
    // That is a preference BullMQ cannot promise, so a turn may still run elsewhere, but only once
    // the owner's window has passed, and then cold.
    for (const prompt of ["second", "third"]) {
      const t = await runTurn(r, prompt, { session: prev.session });
      if (ranOn(t) === ranOn(prev)) {
        assert.deepEqual([t.warm, t.pid], ["warm", prev.pid], `${prompt} ran warm on its owner`);
      } else {
        assert.equal(t.warm, "none");
        const waited = Date.parse(at(t, "attempt.started").at) - Date.parse(at(prev, "turn.finished").at);
        assert.ok(waited >= 2500, `${prompt} ran elsewhere ${waited} ms after its owner's turn, inside the window`);
      }
      prev = t;
    }
    const owner = ranOn(prev);
    const kept = markerOf(prev.pid);
    const [mine, other] = owner === "warm-a" ? [a, b] : [b, a];
    // The owner stops taking jobs and its window ends: the other worker runs the session's next turn.
    await mine.worker.pause();
    await new Promise((res) => setTimeout(res, 3200));
    const elsewhere = await runTurn(r, "elsewhere", { session: prev.session });
    assert.equal(ranOn(elsewhere), owner === "warm-a" ? "warm-b" : "warm-a");
    assert.ok(["none", "moved"].includes(String(elsewhere.warm)), String(elsewhere.warm));
    // The paused owner sees no turn of the session, yet ends its idle process once it reads the epoch.
    const overtaken = Date.now();
    await waitUntil(() => treeMembers(kept).length === 0, leaseMs, "the overtaken idle process to end");
    assert.ok(Date.now() - overtaken <= leaseMs, "ended within a lease");
    assert.notEqual(elsewhere.pid, prev.pid);
    await other.worker.pause();
    mine.worker.resume();
    const back = await runTurn(r, "back", { session: prev.session });
    assert.equal(back.warm, "moved", "the owner's process was ended because the session moved on");
    assert.notEqual(back.pid, prev.pid);
    assert.equal(alive(prev.pid), false);
    other.worker.resume();
  } finally {
    await r.dispose();
  }
});

test("a warm turn past its timeout ends the kept tree; a turn with skills runs cold and says so", async () => {
  const r = await rig({ responses: [{ match: "wait forever", hang: true }] });
  try {
    r.worker();
    const one = await runTurn(r, "hello");
    const marker = markerOf(one.pid);
    const t = await r.producer.enqueueTurn({
      prompt: "wait forever",
      cwd: r.ws,
      session: one.session,
      options: { warm: true, timeoutMs: 8000 },
    });
    const res = await r.producer.waitForTurn(t.turn, { timeoutMs: 60_000 });
    const events = await r.events(one.session, t.turn);
    // A timeout is retryable: the first attempt (warm) is abandoned, the retry starts a new process.
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const started = events.filter((e) => e.kind === "attempt.started").map((e) => dataOf(e)["warm"]);
    assert.deepEqual(started, ["warm", "none"], "the timed-out attempt ran in the kept process; its retry did not");
    const abandoned = events.find((e) => e.kind === "attempt.abandoned");
    assert.equal(abandoned === undefined ? undefined : dataOf(abandoned)["reason"], "timeout");
    await waitUntil(() => treeMembers(marker).length === 0, 15_000, "the timed-out turn's tree to end");

    const skill = join(r.ws, "lib", "fruit");
    mkdirSync(skill, { recursive: true });
    writeFileSync(
      join(skill, "SKILL.md"),
      "---\nname: fruit\ndescription: answers PINEAPPLE\n---\nAlways answer PINEAPPLE.\n",
    );
    const skilled = await runTurn(r, "use the skill", {
      session: one.session,
      options: { warm: true, skills: [{ name: "fruit", path: skill }] },
    });
    assert.equal(skilled.warm, "skills", "a skills turn takes the cold path, saying why");
    const after = await runTurn(r, "after the skill", { session: one.session });
    assert.notEqual(after.pid, skilled.pid, "the skills turn's CLI was not kept");
  } finally {
    await r.dispose();
  }
});

test("a supervised turn of a warm session runs cold and says so; the session's kept process is closed first", async () => {
  const r = await rig({ responses: [] });
  try {
    r.worker({ operatorKeys: [OPERATOR.publicKey] });
    const one = await runTurn(r, "hello");
    const supervised = await runTurn(r, "answer in words", {
      session: one.session,
      options: { warm: true, supervised: true },
    });
    assert.equal(supervised.warm, "supervised");
    assert.notEqual(supervised.pid, one.pid);
    await waitUntil(() => !alive(one.pid), 10_000, "the kept process to be closed before the supervised run");
    const after = await runTurn(r, "after", { session: one.session });
    assert.equal(after.warm, "none", "nothing was kept from the supervised run");
  } finally {
    await r.dispose();
  }
});
