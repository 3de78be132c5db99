// A recorded 10-tool turn re-run against the same turn run fresh, like for like in one process: the
// fresh side enqueues the turn to a primed in-process worker with a scripted model server of its own
// (a new server per turn, so every round plays the whole script), the re-run side calls rerunSession
// (what `turnstream rerun` runs) on the recorded session. Rounds alternate; ratio = median re-run
// seconds / median fresh seconds. `npm run bench -- rerun [rounds]`
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { rerunSession } from "../src/bin/commands/_rerun.ts";
import { createProducer } from "../src/queue/index.ts";
import { startModelServer } from "../src/testing/index.ts";
import { rig } from "../test/worker/_more.ts";
import { median } from "./_stats.ts";

const ROUNDS = Number(process.argv[2] ?? 5);
const setup = await rig({ responses: [] });
const script = {
  responses: [
    ...Array.from({ length: 5 }, (_, step) => ({
      content: [
        { type: "tool_use", name: "Read", input: { file_path: join(setup.ws, `f${step}.txt`) } },
        { type: "tool_use", name: "Bash", input: { command: `cat f${step}.txt` } },
      ],
    })),
    { content: [{ type: "text", text: "read them all" }] },
  ],
};
const env = ["ANTHROPIC_BASE_URL"];
const producer = createProducer({
  redis: setup.redis,
  logPrefix: setup.space.logPrefix,
  queuePrefix: setup.space.queuePrefix,
  allowEnv: env,
});

/** One fresh turn of the script; its session and seconds. */
async function fresh(): Promise<{ session: string; seconds: number }> {
  const t0 = performance.now();
  const server = await startModelServer({ script });
  try {
    const enqueued = await producer.enqueueTurn({
      prompt: "Read the five files.",
      cwd: setup.ws,
      options: { skipPermissions: true, env: { ANTHROPIC_BASE_URL: server.url } },
    });
    const done = await producer.waitForTurn(enqueued.turn, { session: enqueued.session, timeoutMs: 120_000 });
    if (done.status !== "finished") throw new Error(`the fresh turn ${done.status}`);
    return { session: enqueued.session, seconds: (performance.now() - t0) / 1000 };
  } finally {
    await server.close();
  }
}

async function rerun(session: string): Promise<number> {
  const t0 = performance.now();
  const out = await rerunSession({
    redis: setup.redis,
    logPrefix: setup.space.logPrefix,
    session,
    cwd: setup.ws,
    permissionMode: "bypassPermissions",
  });
  if (!out.comparison.match || out.comparison.turns[0]!.steps !== 10)
    throw new Error(`the re-run did not match 10 steps: ${JSON.stringify(out.comparison)}`);
  return (performance.now() - t0) / 1000;
}

try {
  for (let fileIndex = 0; fileIndex < 5; fileIndex++)
    writeFileSync(join(setup.ws, `f${fileIndex}.txt`), `file ${fileIndex}\n`);
  setup.worker({ sandboxed: true, retry: { maxAttempts: 1 }, allowEnv: env });
  const recorded = (await fresh()).session; // also primes the worker, the CLI's pages and its home
  await rerun(recorded);
  const freshSeconds: number[] = [];
  const rerunSeconds: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    freshSeconds.push((await fresh()).seconds);
    rerunSeconds.push(await rerun(recorded));
  }
  const text = (xs: number[]): string => xs.map((s) => s.toFixed(2)).join(" ");
  process.stdout.write(
    `fresh turn (10 tools): ${text(freshSeconds)} s\nrerunSession:          ${text(rerunSeconds)} s\n`,
  );
  const [freshMedian, rerunMedian] = [median(freshSeconds), median(rerunSeconds)];
  process.stdout.write(
    `${JSON.stringify({ bench: "rerun", tools: 10, rounds: ROUNDS, freshSeconds: Number(freshMedian.toFixed(3)), rerunSeconds: Number(rerunMedian.toFixed(3)), ratio: Number((rerunMedian / freshMedian).toFixed(3)) })}\n`,
  );
} finally {
  await producer.close();
  await setup.dispose();
}
