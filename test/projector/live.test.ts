// The live projector on a real Redis: discovery through the session index, two projectors racing
// while the log grows, version bumps (rebuild into new keys, pointer switch, old keys deleted), and
// the process entry point killed with SIGKILL and stopped with SIGTERM.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import {
  fold,
  PROJECTION_VERSION,
  projectionKeys,
  readModel,
  startProjector,
  type Projector,
} from "../../src/projector/index.ts";
import { appendEnvelopes, fixtureLog, fixtureLogNames, readAll, redisCtx, rid, root, viaJson } from "./_support.ts";

const ctx = redisCtx();
after(() => ctx.cleanup());

async function expectEqualToReplay(session: string, version?: number): Promise<void> {
  const all = await readAll(ctx.log, session);
  const model = await readModel(ctx.redis, session, {
    prefix: ctx.prefix,
    ...(version === undefined ? {} : { version }),
  });
  assert.ok(model !== undefined, `${session} has a read model`);
  assert.equal(model.seq, all.length);
  assert.deepEqual(model.state, viaJson(fold(all)), `${session}: live equals replay`);
}

test("two projectors racing while the log grows: every session's read model equals its replay", async () => {
  const names = fixtureLogNames();
  const sessions = names.map(() => rid("live"));
  // Half of each log before the projectors start, the rest while they run.
  await Promise.all(names.map((n, i) => appendEnvelopes(ctx.log, sessions[i]!, fixtureLog(n).slice(0, 5))));
  const opts = { redis: ctx.redis, prefix: ctx.prefix, rescanMs: 100, blockMs: 200, batchEvents: 3 };
  const first = startProjector(opts);
  const second = startProjector(opts);
  try {
    for (let round = 0; round < 4; round++) {
      await Promise.all(
        names.map(async (name, index) => {
          const envs = fixtureLog(name);
          const st = await ctx.log.stat(sessions[index]!);
          const next = envs.slice(st.lastSeq, st.lastSeq + Math.ceil(envs.length / 4));
          await appendEnvelopes(ctx.log, sessions[index]!, next);
        }),
      );
    }
    await Promise.all(
      names.map(async (name, index) => {
        const st = await ctx.log.stat(sessions[index]!);
        await appendEnvelopes(ctx.log, sessions[index]!, fixtureLog(name).slice(st.lastSeq));
      }),
    );
    await Promise.all([first.waitIdle(20_000), second.waitIdle(20_000)]);
    for (const sessionId of sessions) await expectEqualToReplay(sessionId);
    assert.ok(first.stats.commits + second.stats.commits > 0);
  } finally {
    await Promise.all([first.stop(), second.stop()]);
  }
});

test("onCaughtUp gets each session's state once its read models have caught up; a failing hand-off is retried", async () => {
  const name = fixtureLogNames()[0]!;
  const session = rid("caught-up");
  const envelopes = fixtureLog(name);
  await appendEnvelopes(ctx.log, session, envelopes.slice(0, 4));
  const handed: number[] = [];
  let refusals = 2;
  const projector = startProjector({
    redis: ctx.redis,
    prefix: ctx.prefix,
    sessions: [session],
    rescanMs: 100,
    blockMs: 200,
    batchEvents: 3,
    onCaughtUp: async (caught, state) => {
      assert.equal(caught, session);
      if (refusals-- > 0) throw new Error("the summary store is down");
      handed.push(state.lastSeq);
    },
  });
  try {
    await waitFor(async () => handed.at(-1) === 4, 20_000, "the first four events handed over");
    await appendEnvelopes(ctx.log, session, envelopes.slice(4));
    await waitFor(async () => handed.at(-1) === envelopes.length, 20_000, "the rest handed over");
    // Handed over when caught up, not at each of the commits of three events that got there.
    assert.ok(handed.length <= 3, `handed over at ${handed.join(", ")}`);
    assert.ok(projector.stats.errors >= 2, "the two refusals were counted");
  } finally {
    await projector.stop();
  }
});

test("a version bump rebuilds into new keys, switches the pointer, deletes the old keys; the old projector stops", async () => {
  const session = rid("ver");
  const envs = fixtureLog("crash-retry");
  await appendEnvelopes(ctx.log, session, envs.slice(0, 10));
  const opts = { redis: ctx.redis, prefix: ctx.prefix, rescanMs: 100, blockMs: 200, sessions: [session] };
  const v1 = startProjector({ ...opts, version: 1 });
  let v2: Projector | undefined;
  try {
    await v1.waitIdle(10_000);
    const keys = projectionKeys(ctx.prefix, session, 1);
    assert.equal(await ctx.redis.get(keys.pointer), "1");
    assert.equal((await readModel(ctx.redis, session, { prefix: ctx.prefix }))!.version, 1);
    v2 = startProjector({ ...opts, version: 2 });
    await v2.waitIdle(10_000);
    assert.equal(await ctx.redis.get(keys.pointer), "2");
    assert.equal(await ctx.redis.exists(keys.modelOf(1)), 0, "old version's keys deleted after the switch");
    // The log grows: v2 follows; v1 learns it was superseded and stops writing.
    await appendEnvelopes(ctx.log, session, envs.slice(10));
    await v2.waitIdle(10_000);
    const model = await readModel(ctx.redis, session, { prefix: ctx.prefix });
    assert.equal(model!.version, 2);
    await expectEqualToReplay(session);
    assert.equal(await ctx.redis.exists(keys.modelOf(1)), 0, "v1 never wrote again");
    await v1.waitIdle(10_000);
    assert.equal(v1.stats.superseded, 1);
  } finally {
    await v1.stop();
    await v2?.stop();
  }
});

function spawnWorker(): ReturnType<typeof spawn> {
  const entry = join(root, "test", "projector", "_small-batch-projector.ts");
  return spawn(join(root, "node_modules", ".bin", "node"), [entry], {
    cwd: root,
    env: { ...process.env, TURNSTREAM_PREFIX: ctx.prefix },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  // Polls Redis state the worker process writes; there is no event to wait on across processes.
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test("the projector process (workers/projector.ts' runProjectorEntry): SIGKILL mid-rebuild then restart loses and doubles nothing; SIGTERM stops it cleanly", async () => {
  const session = rid("proc");
  // A few thousand events so the kill lands mid-rebuild.
  const envs = fixtureLog("background-subagent");
  const many: ReturnType<typeof fixtureLog> = [];
  for (let turn = 0; turn < 300; turn++) {
    for (const envelope of envs) many.push({ ...envelope, turn: `t${turn}`, seq: many.length + 1 });
  }
  for (let offset = 0; offset < many.length; offset += 500)
    await appendEnvelopes(ctx.log, session, many.slice(offset, offset + 500));
  const keys = projectionKeys(ctx.prefix, session, PROJECTION_VERSION);
  const first = spawnWorker();
  const firstExit = once(first, "exit");
  let stderr = "";
  first.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  try {
    await waitFor(async () => Number((await ctx.redis.hget(keys.model, "seq")) ?? 0) > 0, 20_000, "a first commit");
  } finally {
    // Also when the wait failed: a projector left running would keep the test process alive.
    first.kill("SIGKILL");
    await firstExit;
  }
  const partial = Number(await ctx.redis.hget(keys.model, "seq"));
  const second = spawnWorker();
  const out: string[] = [];
  const started = new Promise<void>((resolve, reject) => {
    second.stdout!.on("data", (chunk: Buffer) => {
      out.push(chunk.toString());
      if (out.join("").includes("projector started")) resolve();
    });
    second.once("exit", (code) =>
      reject(new Error(`the restarted projector exited (${code}) before it started: ${stderr.slice(-500)}`)),
    );
  });
  second.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  try {
    await started;
    await waitFor(
      async () => Number((await ctx.redis.hget(keys.model, "seq")) ?? 0) === many.length,
      60_000,
      "the restarted projector to catch up",
    );
    await expectEqualToReplay(session);
    assert.ok(partial > 0 && partial < many.length, `killed mid-rebuild (at ${partial} of ${many.length})`);
  } finally {
    const t0 = Date.now();
    second.kill("SIGTERM");
    const [code] = (await once(second, "exit")) as [number | null];
    assert.equal(code, 0, `clean exit after SIGTERM; stderr: ${stderr.slice(-500)}`);
    assert.ok(Date.now() - t0 < 6000, "bounded shutdown");
    assert.ok(out.join("").includes("projector stopped"));
  }
});
