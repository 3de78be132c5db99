// The lease keeper renews a running turn's lease and stops the turn when the lease is lost, when the
// turn was cancelled, or when Redis stayed unreachable for longer than the lease's TTL.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { SessionOrder } from "../../src/queue/index.ts";
import { LeaseKeeper } from "../../src/worker/lease-keeper.ts";
import type { StopReason } from "../../src/worker/index.ts";

/** A fake order: renew is all the keeper calls on one, so it is all the fake has. */
function orderRenewingWith(renew: SessionOrder["renew"]): SessionOrder {
  const fake: Pick<SessionOrder, "renew"> = { renew };
  return fake as SessionOrder;
}

/**
 * A keeper over a fake order whose n-th renew answers `answers[n]` (the last one repeats); resolves
 * with the first stop.
 */
function keep(
  leaseMs: number,
  answers: Array<() => Promise<"ok" | "lost" | "cancelled">>,
): { stopped: Promise<StopReason>; renews: number[]; keeper: LeaseKeeper } {
  const renews: number[] = [];
  const started = Date.now();
  let resolveStop!: (reason: StopReason) => void;
  const stopped = new Promise<StopReason>((r) => (resolveStop = r));
  const order = orderRenewingWith((session, turn, token, ms) => {
    assert.deepEqual([session, turn, token, ms], ["s", "t", "tok", leaseMs]);
    renews.push(Date.now() - started);
    return answers[Math.min(renews.length - 1, answers.length - 1)]!();
  });
  const keeper = new LeaseKeeper({ order, session: "s", turn: "t", token: "tok", leaseMs, stop: resolveStop });
  return { stopped, renews, keeper };
}

test("renewed while it holds; a cancel read by the renew stops the turn as cancelled", async () => {
  const lease = keep(300, [async () => "ok", async () => "ok", async () => "cancelled"]);
  try {
    assert.equal(await lease.stopped, "cancelled");
    assert.ok(lease.renews.length >= 3, `${lease.renews.length} renews`);
  } finally {
    lease.keeper.stop();
  }
});

test("a lost lease stops the turn at once", async () => {
  const lease = keep(300, [async () => "lost"]);
  try {
    assert.equal(await lease.stopped, "lease_lost");
    assert.equal(lease.renews.length, 1);
  } finally {
    lease.keeper.stop();
  }
});

test("Redis unreachable: the turn runs on until the lease's TTL has passed since the last renew", async () => {
  const lease = keep(300, [async () => Promise.reject(new Error("ECONNREFUSED"))]);
  try {
    assert.equal(await lease.stopped, "lease_lost");
    // The first failed renew (at ~200 ms) is within the TTL; only a later one finds it passed.
    assert.ok(lease.renews.length >= 2, `${lease.renews.length} renews`);
    assert.ok(lease.renews.at(-1)! > 300, `stopped at ${lease.renews.at(-1)} ms`);
  } finally {
    lease.keeper.stop();
  }
});

test("a renewal still in flight when the job gives the lease back itself stops nothing", async () => {
  let answerLost!: () => void;
  const inFlight = new Promise<"lost">((resolve) => (answerLost = () => resolve("lost")));
  const lease = keep(600, [() => inFlight]);
  while (lease.renews.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
  lease.keeper.stop();
  answerLost();
  const stoppedBy = await Promise.race([
    lease.stopped,
    new Promise((resolve) => setTimeout(() => resolve("none"), 300)),
  ]);
  assert.equal(stoppedBy, "none");
});
