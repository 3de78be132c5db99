// The lease keeper renews a running turn's lease and stops the turn when the lease is lost, when the
// turn was cancelled, or when Redis stayed unreachable for longer than the lease's TTL.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { SessionOrder } from "../../src/queue/index.ts";
import { LeaseKeeper } from "../../src/worker/lease-keeper.ts";
import type { StopReason } from "../../src/worker/index.ts";

/** A keeper over a fake order whose n-th renew answers `answers[n]` (the last one repeats); resolves with the first stop. */
function keep(
  leaseMs: number,
  answers: Array<() => Promise<"ok" | "lost" | "cancelled">>,
): { stopped: Promise<StopReason>; renews: number[]; keeper: LeaseKeeper } {
  const renews: number[] = [];
  const started = Date.now();
  let resolveStop!: (r: StopReason) => void;
  const stopped = new Promise<StopReason>((r) => (resolveStop = r));
  const order = {
    renew: (session: string, turn: string, token: string, ms: number) => {
      assert.deepEqual([session, turn, token, ms], ["s", "t", "tok", leaseMs]);
      renews.push(Date.now() - started);
      return answers[Math.min(renews.length - 1, answers.length - 1)]!();
    },
  } as unknown as SessionOrder;
  const keeper = new LeaseKeeper({ order, session: "s", turn: "t", token: "tok", leaseMs, stop: resolveStop });
  return { stopped, renews, keeper };
}

test("renewed while it holds; a cancel read by the renew stops the turn as cancelled", async () => {
  const k = keep(300, [async () => "ok", async () => "ok", async () => "cancelled"]);
  try {
    assert.equal(await k.stopped, "cancelled");
    assert.ok(k.renews.length >= 3, `${k.renews.length} renews`);
  } finally {
    k.keeper.stop();
  }
});

test("a lost lease stops the turn at once", async () => {
  const k = keep(300, [async () => "lost"]);
  try {
    assert.equal(await k.stopped, "lease_lost");
    assert.equal(k.renews.length, 1);
  } finally {
    k.keeper.stop();
  }
});

test("Redis unreachable: the turn runs on until the lease's TTL has passed since the last renew", async () => {
  const k = keep(300, [async () => Promise.reject(new Error("ECONNREFUSED"))]);
  try {
    assert.equal(await k.stopped, "lease_lost");
    // The first failed renew (at ~200 ms) is within the TTL; only a later one finds it passed.
    assert.ok(k.renews.length >= 2, `${k.renews.length} renews`);
    assert.ok(k.renews.at(-1)! > 300, `stopped at ${k.renews.at(-1)} ms`);
  } finally {
    k.keeper.stop();
  }
});
