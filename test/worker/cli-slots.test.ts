// CLI slots on a real BullMQ worker and Redis: a job whose CLI has printed its result lets the worker
// fetch the next job while it ends its turn, and no more than `size` CLIs ever run at once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Queue, Worker, type Job } from "bullmq";
import { bullConnection } from "../../src/queue/index.ts";
import { CliSlots, type CliSlot, type SlotWorker } from "../../src/worker/cli-slots.ts";
import { cleanupKeys, redisFor, testSpace } from "./_support.ts";

type Processor = (job: Job, slot: CliSlot) => Promise<void>;

async function harness(size: number, run: Processor) {
  const space = testSpace();
  const redis = redisFor();
  const conn = bullConnection(redis);
  const workerConn = bullConnection(redis);
  const queue = new Queue("slots", { connection: conn as never, prefix: space.queuePrefix });
  let slots: CliSlots | undefined;
  const worker = new Worker(
    "slots",
    async (job) => {
      const slot = slots!.hold();
      try {
        await run(job, slot);
      } finally {
        slot.done();
      }
    },
    { connection: workerConn as never, prefix: space.queuePrefix, concurrency: size, autorun: false },
  );
  slots = new CliSlots(worker, size);
  void worker.run();
  await worker.waitUntilReady();
  const finished = new Set<string>();
  worker.on("completed", (j) => finished.add(String(j.id)));
  worker.on("failed", (j, err) => assert.fail(`job ${j?.id} failed: ${err.message}`));
  return {
    slots,
    worker,
    add: (n: number) =>
      queue.addBulk(Array.from({ length: n }, (_, i) => ({ name: "t", data: { i }, opts: { jobId: `j${i}` } }))),
    async allDone(jobCount: number, ms = 20_000) {
      const until = Date.now() + ms;
      while (finished.size < jobCount && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      assert.equal(finished.size, jobCount, "every job completed");
    },
    async close() {
      await worker.close();
      await queue.close();
      await cleanupKeys(redis, space);
      await conn.quit();
      await workerConn.quit();
      redis.disconnect();
      space.cleanup();
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One stand-in CLI under a slot: counted live from start to exit; its result comes `exitMs` before it exits. */
async function fakeCli(
  slot: CliSlot,
  live: { now: number; max: number },
  runMs: number,
  exitMs: number,
): Promise<void> {
  const release = await slot.acquire();
  assert.ok(release);
  live.now++;
  live.max = Math.max(live.max, live.now);
  await sleep(runMs);
  slot.ending();
  await sleep(exitMs);
  live.now--;
  release();
}

test("a job past its result line lets the next job start before it returns, which waits for the CLI to exit", async () => {
  const seen: string[] = [];
  let secondStarted!: () => void;
  const second = new Promise<void>((r) => (secondStarted = r));
  let firstExited = false;
  const slotHarness = await harness(1, async (job, slot) => {
    const release = await slot.acquire();
    assert.ok(release);
    if (job.data.i === 0) {
      seen.push("cli 0 started");
      slot.ending();
      // The CLI has printed its result but not exited yet: the next job must already be fetched.
      const ok = await Promise.race([second.then(() => true), sleep(5000).then(() => false)]);
      assert.ok(ok, "the next job was fetched while this one was still running");
      await sleep(50);
      seen.push("cli 0 exited");
      firstExited = true;
      release();
      await sleep(100); // the end of the turn, overlapping the next CLI
      seen.push("job 0 returned");
    } else {
      seen.push(`cli 1 started after exit: ${firstExited}`);
      release();
    }
  });
  const inner = slotHarness.worker;
  const origProcess = inner.processJob.bind(inner);
  // Mark when job 1 reaches the processor, before it asks for a slot.
  inner.processJob = ((job: Job, ...rest: unknown[]) => {
    if (job.data.i === 1) secondStarted();
    return (origProcess as (...args: unknown[]) => Promise<unknown>)(job, ...rest);
  }) as typeof inner.processJob;
  try {
    await slotHarness.add(2);
    await slotHarness.allDone(2);
    assert.deepEqual(seen, ["cli 0 started", "cli 0 exited", "cli 1 started after exit: true", "job 0 returned"]);
    assert.equal(slotHarness.worker.concurrency, 1, "the extra job's allowance ends with the job");
    assert.equal(slotHarness.slots.busy, 0);
  } finally {
    await slotHarness.close();
  }
});

test("many jobs that end early: never more CLIs than slots, and jobs do overlap their ends", async () => {
  const cli = { now: 0, max: 0 };
  let jobs = 0;
  let maxJobs = 0;
  const slotHarness = await harness(2, async (job, slot) => {
    jobs++;
    maxJobs = Math.max(maxJobs, jobs);
    try {
      await sleep(job.data.i % 3); // lease, begin
      await fakeCli(slot, cli, 10 + ((job.data.i * 7) % 15), 5 + (job.data.i % 4));
      await sleep(8); // the turn's end
    } finally {
      jobs--;
    }
  });
  try {
    await slotHarness.add(30);
    await slotHarness.allDone(30);
    assert.ok(cli.max <= 2, `at most 2 CLIs at once (saw ${cli.max})`);
    assert.equal(cli.max, 2);
    assert.ok(maxJobs > 2, `jobs past their CLI overlapped new ones (saw ${maxJobs} at once)`);
    assert.equal(slotHarness.worker.concurrency, 2);
    assert.equal(slotHarness.slots.busy, 0);
  } finally {
    await slotHarness.close();
  }
});

test("a job that starts a second CLI after its result (a restored session) waits for a slot like any other", async () => {
  const cli = { now: 0, max: 0 };
  const slotHarness = await harness(1, async (job, slot) => {
    for (let run = 0; run < (job.data.i === 0 ? 2 : 1); run++) await fakeCli(slot, cli, 15, 10);
  });
  try {
    await slotHarness.add(4);
    await slotHarness.allDone(4);
    assert.equal(cli.max, 1);
  } finally {
    await slotHarness.close();
  }
});

test("closing turns away the jobs waiting for a slot, and an aborted wait gives the slot up", async () => {
  // Never running: closing must not need BullMQ's loop.
  const worker: SlotWorker = {
    concurrency: 1,
    isPaused: () => false,
    isRunning: () => false,
    pause: async () => {},
    resume: async () => {},
  };
  const slots = new CliSlots(worker, 1);
  const holdA = slots.hold();
  const holdB = slots.hold();
  const holdC = slots.hold();
  const releaseA = await holdA.acquire();
  assert.ok(releaseA);
  const ac = new AbortController();
  const waitingB = holdB.acquire(ac.signal);
  const waitingC = holdC.acquire();
  ac.abort();
  assert.equal(await waitingB, undefined, "an aborted wait is refused");
  slots.close();
  assert.equal(await waitingC, undefined, "a closing worker starts no further CLI");
  assert.equal(await holdA.acquire(), undefined);
  holdA.done();
  assert.equal(slots.busy, 0, "done gives back what the job still held");
});
