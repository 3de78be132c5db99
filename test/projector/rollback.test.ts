// The live projector after a failover that lost acknowledged writes: the session's log and its read
// model go back together (one Redis, one replication stream), but the projector's memory does not.
// It must notice that the stored checkpoint is below the one it committed and fold the events written
// again under the lost seqs, instead of passing them over as already seen.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { fold, readModel, startProjector } from "../../src/projector/index.ts";
import { readAll, redisCtx, rid, viaJson } from "./_support.ts";

const ctx = redisCtx();
after(() => ctx.cleanup());

const queued = (turn: string) => ({
  turn,
  attempt: 0,
  kind: "turn.queued",
  data: { prompt: `prompt of ${turn}`, cwd: "/work" },
});

async function modelAt(session: string, seq: number, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while ((await readModel(ctx.redis, session, { prefix: ctx.prefix }))?.seq !== seq) {
    if (Date.now() > end) throw new Error(`the read model of ${session} did not reach seq ${seq} in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test("a rolled-back session (log and read model) is folded again from what the store still holds", async () => {
  const session = rid("rb");
  await ctx.log.appendUnfenced(session, ["t1", "t2", "t3"].map(queued));
  const projector = startProjector({
    redis: ctx.redis,
    prefix: ctx.prefix,
    rescanMs: 100,
    blockMs: 200,
    sessions: [session],
  });
  try {
    await modelAt(session, 3, 10_000);
    // What a replica cut off now holds: every key of the session, the read model's included.
    const keys = (await ctx.redis.keys(`${ctx.prefix}{s:${session}}*`)).sort();
    const saved = await Promise.all(keys.map(async (k) => [k, await ctx.redis.dumpBuffer(k)] as const));
    await ctx.log.appendUnfenced(session, ["lost1", "lost2", "lost3"].map(queued));
    await modelAt(session, 6, 10_000);
    // The failover: the primary's later writes are gone.
    for (const [key, dump] of saved) await ctx.redis.restore(key, 0, dump!, "REPLACE");
    const extra = (await ctx.redis.keys(`${ctx.prefix}{s:${session}}*`)).filter((k) => !keys.includes(k));
    if (extra.length > 0) await ctx.redis.del(...extra);
    // New events under seqs 4 and 5, which the projector had folded before (as other events).
    await ctx.log.appendUnfenced(session, ["t4", "t5"].map(queued));
    await modelAt(session, 5, 10_000);
    const all = await readAll(ctx.log, session);
    const model = await readModel(ctx.redis, session, { prefix: ctx.prefix });
    assert.deepEqual(model!.state, viaJson(fold(all)), "the read model is the fold of the log as it now is");
    assert.doesNotMatch(JSON.stringify(model!.state), /lost\d/, "nothing of the lost events is left in it");
  } finally {
    await projector.stop();
  }
});
