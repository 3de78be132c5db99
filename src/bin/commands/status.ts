// `turnstream status`: queue counts, live workers, and the turns running now, per session.
import { closeTurnQueue, createTurnQueue } from "../../queue/index.ts";
import { EXIT } from "../exit-codes.ts";
import { parseCommandArgs } from "./_args.ts";
import { QUEUE_FLAG_OPTIONS, QUEUE_FLAGS_USAGE, queueConfigOf, redisOrExplain } from "./_connect.ts";

export const summary = "queue counts, live workers, running turns per session";

interface RunningTurn {
  session: string;
  turn: string;
  attempt: number;
  startedAt: string | undefined;
}

const usage = `usage: turnstream status [--json] [--prefix P] [--queue-prefix Q] [--queue NAME]
  --json            one JSON object: counts, workers, running
${QUEUE_FLAGS_USAGE}`;

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("status", usage, { args: argv, options: { json: { type: "boolean" }, ...QUEUE_FLAG_OPTIONS, help: { type: "boolean", short: "h" } } });
  if (typeof args === "number") return args;
  const { values } = args;
  const redis = await redisOrExplain("status");
  if (redis === undefined) return EXIT.infrastructure;
  const queue = createTurnQueue({ redis, ...queueConfigOf(values) });
  try {
    const [counts, workers, active] = await Promise.all([
      queue.getJobCounts("waiting", "active", "delayed", "prioritized", "completed", "failed"),
      queue.getWorkers(),
      queue.getActive(0, 999),
    ]);
    const running: RunningTurn[] = active.map((job) => ({
      session: String((job.data as { session?: unknown }).session ?? "?"),
      turn: String((job.data as { turn?: unknown }).turn ?? job.id),
      attempt: job.attemptsMade + 1,
      startedAt: job.processedOn ? new Date(job.processedOn).toISOString() : undefined,
    }));
    const workerNames = workers.map((w) => String(w["name"] ?? w["id"] ?? "?"));
    if (values.json) {
      process.stdout.write(`${JSON.stringify({ counts, workers: workerNames, running })}\n`);
      return 0;
    }
    const c = counts as Record<string, number>;
    process.stdout.write(
      `queue: ${c["waiting"] ?? 0} waiting, ${c["active"] ?? 0} active, ${c["delayed"] ?? 0} delayed (waiting their session's turn or a retry), ` +
        `${c["completed"] ?? 0} completed, ${c["failed"] ?? 0} failed\n`,
    );
    process.stdout.write(`workers: ${workerNames.length}${workerNames.length ? ` (${workerNames.join(", ")})` : ""}\n`);
    if (running.length === 0) process.stdout.write("running: none\n");
    for (const r of running.sort((a, b) => a.session.localeCompare(b.session))) {
      process.stdout.write(`running: session ${r.session} turn ${r.turn} attempt ${r.attempt}${r.startedAt ? ` since ${r.startedAt}` : ""}\n`);
    }
    return 0;
  } finally {
    await closeTurnQueue(queue);
    redis.disconnect();
  }
}
