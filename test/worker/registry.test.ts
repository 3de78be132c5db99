// The worker registry on real Redis: a worker is listed with its slots while it runs and gone after a
// clean close; a second process under the same instance id finds it taken and the first does not; the
// second takes the id over once the first has stopped beating.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readWorkers, registryKeys } from "../../src/worker/registry.ts";
import { rig } from "./_more.ts";

const until = async (what: string, pred: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

test("a worker heartbeats its entry and removes it on close; a second process under its instance id finds it taken", async () => {
  const stage = await rig({ responses: [] });
  try {
    const firstWorker = stage.worker({
      instanceId: "inst-shared",
      workerId: "w-first",
      concurrency: 2,
      heartbeatMs: 200,
    });
    await firstWorker.ready();
    const listed = await readWorkers(stage.redis, stage.space.logPrefix);
    assert.equal(listed.length, 1);
    const [entry] = listed;
    assert.equal(entry!.id, "inst-shared");
    assert.equal(entry!.worker, "w-first");
    assert.equal(entry!.pid, process.pid);
    assert.deepEqual([entry!.slotsBusy, entry!.slotsTotal], [0, 2]);
    assert.match(entry!.version, /^\d+\.\d+\.\d+/);
    assert.match(entry!.boot, /^[0-9a-f]{24}$/);
    assert.ok(Math.abs(Date.now() - Date.parse(entry!.beatAt)) < 10_000, entry!.beatAt);
    const ttl = await stage.redis.pttl(registryKeys(stage.space.logPrefix).entry("inst-shared"));
    assert.ok(ttl > 0 && ttl <= 600, `entry expires within three beats (pttl ${ttl})`);
    assert.equal(firstWorker.instanceTaken, false);

    const errors: string[] = [];
    const logger = {
      debug() {},
      info() {},
      warn() {},
      error: (_o: unknown, msg?: string) => void errors.push(String(msg)),
    };
    const secondWorker = stage.worker({ instanceId: "inst-shared", workerId: "w-second", heartbeatMs: 200, logger });
    await secondWorker.ready();
    assert.equal(secondWorker.instanceTaken, true, "the second process under the same instance id finds it taken");
    // `fenced`, the older name, still answers the same.
    assert.equal(secondWorker.fenced, true);
    // Beats go on for both: the first keeps the id, the second keeps finding it taken.
    await new Promise((res) => setTimeout(res, 700));
    assert.equal(firstWorker.instanceTaken, false);
    assert.equal(secondWorker.instanceTaken, true);
    assert.equal(
      errors.filter((m) => /another process is running as this instance/.test(m)).length,
      1,
      "said once, as an error",
    );
    const still = await readWorkers(stage.redis, stage.space.logPrefix);
    assert.deepEqual(
      still.map((w) => [w.worker, w.boot]),
      [["w-first", entry!.boot]],
    );

    await firstWorker.close({ graceMs: 1000 });
    // The clean close removed the first's entry; the second's next beat takes the id.
    await until("the second worker to hold the instance id", () => !secondWorker.instanceTaken);
    const after = await readWorkers(stage.redis, stage.space.logPrefix);
    assert.deepEqual(
      after.map((w) => w.worker),
      ["w-second"],
    );
    await secondWorker.close({ graceMs: 1000 });
    assert.deepEqual(await readWorkers(stage.redis, stage.space.logPrefix), []);
    assert.equal(
      await stage.redis.zcard(registryKeys(stage.space.logPrefix).live),
      0,
      "the index holds no member after clean closes",
    );
  } finally {
    await stage.dispose();
  }
});

test("a heartbeat against an unreachable Redis never throws, logs the failure rate-limited, and stops cleanly", async () => {
  const { Redis } = await import("ioredis");
  const { startHeartbeat } = await import("../../src/worker/registry.ts");
  const dead = new Redis({
    host: "127.0.0.1",
    port: 1,
    maxRetriesPerRequest: 0,
    retryStrategy: () => 50,
    lazyConnect: false,
  });
  dead.on("error", () => undefined);
  let sent = 0;
  const send = dead.sendCommand.bind(dead);
  dead.sendCommand = ((...a: Parameters<typeof send>) => (sent++, send(...a))) as typeof dead.sendCommand;
  const warned: string[] = [];
  const logger = {
    debug() {},
    info() {},
    error() {},
    warn: (_o: unknown, msg?: string) => void warned.push(String(msg)),
  };
  const hb = startHeartbeat({
    redis: dead as never,
    prefix: "tw-dead:",
    id: "nowhere",
    worker: "w",
    queue: "{turnstream}:turns",
    intervalMs: 50,
    load: () => ({ slotsBusy: 0, slotsTotal: 1, warmKept: 0, draining: false }),
    logger,
  });
  try {
    await hb.first;
    await new Promise((r) => setTimeout(r, 600));
    assert.equal(hb.instanceTaken, false, "a failed beat does not count as the id taken");
    const failures = warned.filter((m) => m === "worker heartbeat failed");
    assert.ok(sent >= 5, `beats went on (${sent} commands)`);
    assert.equal(failures.length, 1, `beats failed many times, said once: ${warned.join(" | ")}`);
    await hb.stop();
    assert.ok(warned.some((m) => /could not remove the worker's registry entry/.test(m)));
  } finally {
    dead.disconnect();
  }
});

test("a worker that starts shutting down says so in its entry at once, while its running turn finishes", async () => {
  const stage = await rig({
    responses: [
      { content: [{ type: "tool_use", name: "Bash", input: { command: "sleep 3", description: "wait" } }] },
      { content: [{ type: "text", text: "done" }] },
    ],
  });
  try {
    const draining = stage.worker({ instanceId: "inst-draining", heartbeatMs: 5000, toolSandbox: { mode: "off" } });
    await draining.ready();
    assert.deepEqual(
      (await readWorkers(stage.redis, stage.space.logPrefix)).map((entry) => entry.draining),
      [false],
    );
    const queued = await stage.producer.enqueueTurn({ prompt: "sleep", cwd: stage.ws });
    await until("the turn to start", async () =>
      (await stage.events(queued.session, queued.turn)).some((event) => event.kind === "attempt.started"),
    );
    const closing = draining.close({ graceMs: 30_000 });
    // Long before the next beat (every 5 s): the close beats at once.
    await until("the entry to say draining", async () =>
      (await readWorkers(stage.redis, stage.space.logPrefix)).some((entry) => entry.draining),
    );
    await closing;
    assert.equal((await stage.producer.waitForTurn(queued.turn, { timeoutMs: 30_000 })).status, "finished");
  } finally {
    await stage.dispose();
  }
});
