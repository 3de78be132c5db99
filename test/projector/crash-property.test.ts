// Property: whatever happens to the projectors — killed between or inside steps (before the commit
// is sent, after it landed but before the reply was seen), events delivered again, two projectors
// racing on one session, the log growing meanwhile — the stored read model always equals the fold of
// the log prefix it claims, and after a restart catches up it equals a replay from zero.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { fold, readModel, SessionProjection, type CommitReply } from "../../src/projector/index.ts";
import type { Envelope } from "../../src/log/index.ts";
import { appendEnvelopes, fixtureLog, fixtureLogNames, readAll, redisCtx, rid, viaJson } from "./_support.ts";

const ctx = redisCtx();
after(() => ctx.cleanup());

const logs = Object.fromEntries(fixtureLogNames().map((n) => [n, fixtureLog(n)]));

type Op =
  | { op: "append"; n: number }
  | { op: "step"; who: 0 | 1 }
  | { op: "crash"; who: 0 | 1 }
  | { op: "crashBeforeCommit"; who: 0 | 1 }
  | { op: "crashAfterCommit"; who: 0 | 1 }
  | { op: "redeliver"; who: 0 | 1; back: number; n: number };

const who = fc.constantFrom<0 | 1>(0, 1);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant("append" as const), n: fc.integer({ min: 1, max: 12 }) }),
  fc.record({ op: fc.constant("step" as const), who }),
  fc.record({ op: fc.constant("step" as const), who }),
  fc.record({ op: fc.constant("crash" as const), who }),
  fc.record({ op: fc.constant("crashBeforeCommit" as const), who }),
  fc.record({ op: fc.constant("crashAfterCommit" as const), who }),
  fc.record({
    op: fc.constant("redeliver" as const),
    who,
    back: fc.integer({ min: 0, max: 10 }),
    n: fc.integer({ min: 1, max: 8 }),
  }),
);

class Crash extends Error {}

test("live read model equals replay from zero under crashes, re-deliveries and racing projectors", async () => {
  let cases = 0;
  let conflicts = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...Object.keys(logs)),
      fc.array(opArb, { minLength: 1, maxLength: 25 }),
      fc.tuple(fc.integer({ min: 1, max: 7 }), fc.integer({ min: 1, max: 7 })),
      async (name, ops, batches) => {
        cases++;
        const session = rid("prop");
        const source = logs[name]!;
        let appended = 0;
        const fault: { before: boolean; after: boolean }[] = [
          { before: false, after: false },
          { before: false, after: false },
        ];
        const make = (slot: 0 | 1): SessionProjection =>
          new SessionProjection({
            log: ctx.log,
            session,
            version: 1,
            batchEvents: batches[slot],
            faults: {
              beforeCommit: () => {
                if (fault[slot]!.before) throw new Crash("killed before the commit was sent");
              },
              afterCommit: (_s: string, reply: CommitReply) => {
                if (fault[slot]!.after && reply.outcome === "committed")
                  throw new Crash("killed after the commit landed");
              },
            },
          });
        const projections: SessionProjection[] = [make(0), make(1)];
        let stored = 0;
        const check = async (): Promise<void> => {
          const model = await readModel(ctx.redis, session, { prefix: ctx.prefix });
          if (model === undefined) return;
          assert.ok(
            model.seq >= stored,
            `checkpoint went back from ${stored} to ${model.seq}: a stale projector overwrote newer work`,
          );
          stored = model.seq;
          const prefixLog = (await readAll(ctx.log, session)).slice(0, model.seq);
          assert.equal(model.state.lastSeq, model.seq);
          assert.deepEqual(
            model.state,
            viaJson(fold(prefixLog)),
            `stored state at seq ${model.seq} is the fold of that prefix`,
          );
        };
        try {
          for (const op of ops) {
            switch (op.op) {
              case "append": {
                const next = source.slice(appended, appended + op.n);
                if (next.length > 0) await appendEnvelopes(ctx.log, session, next);
                appended += next.length;
                break;
              }
              case "step":
                if ((await projections[op.who]!.step()) === "conflict") conflicts++;
                break;
              case "crash":
                projections[op.who] = make(op.who);
                break;
              case "crashBeforeCommit":
              case "crashAfterCommit": {
                fault[op.who] = { before: op.op === "crashBeforeCommit", after: op.op === "crashAfterCommit" };
                try {
                  await projections[op.who]!.step();
                } catch (err) {
                  if (!(err instanceof Crash)) throw err;
                }
                fault[op.who] = { before: false, after: false };
                projections[op.who] = make(op.who); // the process died: its memory is gone
                break;
              }
              case "redeliver": {
                // Events this projector already folded (and maybe new ones) handed to it again.
                const proj = projections[op.who]!;
                if (proj.state === undefined) await proj.load();
                const all = await readAll(ctx.log, session);
                const from = Math.max(0, proj.state!.lastSeq - op.back);
                proj.apply(all.slice(from, from + op.n));
                const committed = await proj.commit();
                if (committed === "conflict" || committed === "repoint") {
                  conflicts++;
                  await proj.load();
                }
                break;
              }
            }
            await check();
          }
          // Everything appended; one restarted projector catches up.
          await appendEnvelopes(ctx.log, session, source.slice(appended));
          const fresh = make(0);
          assert.equal(await fresh.catchUp(), "idle");
          const all: Envelope[] = await readAll(ctx.log, session);
          const model = await readModel(ctx.redis, session, { prefix: ctx.prefix });
          assert.ok(model !== undefined);
          assert.equal(model.seq, all.length);
          assert.deepEqual(model.state, viaJson(fold(all)), "live equals replay from zero");
          assert.equal(model.state.events, all.length, "no event applied twice");
        } finally {
          await ctx.log.destroy(session);
          await ctx.redis.del(projections[0]!.keys.model, projections[0]!.keys.pointer);
        }
      },
    ),
    { numRuns: 100 },
  );
  assert.equal(cases >= 100, true);
  assert.ok(conflicts > 0, "the schedules made projectors race (some commits were refused)");
});
