// `turnstream status`: queue counts, how long the oldest waiting turn has waited, the live workers of
// the registry with their slots, the turns running now, and a warning when turns wait on no worker.
import { forTerminal } from "../../kernel/index.ts";
import type { Queue } from "bullmq";
import type { RedisClient } from "../../log/index.ts";
import { closeTurnQueue, createTurnQueue, jobRow, readWaitingTurns } from "../../queue/index.ts";
import { readWorkers, type WorkerEntry } from "../../worker/index.ts";
import { EXIT } from "../exit-codes.ts";
import { parseCommandArgs } from "./_args.ts";
import { logPrefix, QUEUE_FLAG_OPTIONS, QUEUE_FLAGS_USAGE, queueConfigOf, redisOrExplain } from "./_connect.ts";
import { formatAge } from "./_duration.ts";

export const summary = "queue counts, oldest waiting turn, live workers, running turns, warnings";

interface RunningTurn {
  session: string;
  turn: string;
  attempt: number;
  startedAt: string | undefined;
}

type WorkerView = Omit<WorkerEntry, "boot"> & { heartbeatAgeMs: number };

interface StatusReport {
  counts: Record<string, number>;
  /** Since the oldest turn waiting to run was queued; null when none waits. */
  oldestWaitingAgeMs: number | null;
  workers: WorkerView[];
  running: RunningTurn[];
  warnings: string[];
}

const usage = `usage: turnstream status [--json] [--strict] [--prefix P] [--queue-prefix Q] [--queue NAME]
  --json            one JSON object: counts, oldestWaitingAgeMs, workers, running, warnings
  --strict          exit 3 when there is a warning (turns wait and no worker is alive)
${QUEUE_FLAGS_USAGE}`;

export async function run(argv: string[]): Promise<number> {
  const options = {
    json: { type: "boolean" },
    strict: { type: "boolean" },
    ...QUEUE_FLAG_OPTIONS,
    help: { type: "boolean", short: "h" },
  } as const;
  const args = parseCommandArgs("status", usage, { args: argv, options });
  if (typeof args === "number") return args;
  const { values } = args;
  const redis = await redisOrExplain("status");
  if (redis === undefined) return EXIT.infrastructure;
  const queue = createTurnQueue({ redis, ...queueConfigOf(values) });
  try {
    const report = await gather(queue, redis, logPrefix(values.prefix));
    if (values.json) process.stdout.write(`${JSON.stringify(report)}\n`);
    else printReport(report);
    return values.strict === true && report.warnings.length > 0 ? EXIT.infrastructure : EXIT.finished;
  } finally {
    await closeTurnQueue(queue);
    redis.disconnect();
  }
}

async function gather(queue: Queue, redis: RedisClient, prefix: string): Promise<StatusReport> {
  const now = Date.now();
  const [counts, registered, active, waiting, connections] = await Promise.all([
    queue.getJobCounts("waiting", "active", "delayed", "prioritized", "completed", "failed"),
    readWorkers(redis, prefix),
    queue.getActive(0, 999),
    readWaitingTurns(queue, now),
    // CLIENT LIST, which an ACL may refuse: only a hint for the warning.
    queue.getWorkersCount().catch(() => undefined),
  ]);
  const workers = registered.map(({ boot: _boot, ...entry }) => ({
    ...entry,
    heartbeatAgeMs: Math.max(0, now - Date.parse(entry.beatAt)),
  }));
  const running: RunningTurn[] = active.map((job) => {
    const { session, turn, attempt, startedAt } = jobRow(job, "active");
    return { session, turn, attempt, startedAt };
  });
  const report: StatusReport = {
    counts: { ...counts, due: waiting.dueDelayed },
    oldestWaitingAgeMs: waiting.oldestQueuedAt === undefined ? null : Math.max(0, now - waiting.oldestQueuedAt),
    workers,
    running: running.sort((a, b) => a.session.localeCompare(b.session)),
    warnings: [],
  };
  const ready = (counts["waiting"] ?? 0) + (counts["prioritized"] ?? 0) + waiting.dueDelayed;
  if (ready > 0 && workers.length === 0) report.warnings.push(noWorkerWarning(ready, prefix, connections));
  return report;
}

function noWorkerWarning(ready: number, prefix: string, connections: number | undefined): string {
  const seen =
    connections !== undefined && connections > 0
      ? ` (the queue has ${connections} worker connection(s): check that those workers use key prefix "${prefix}", TURNSTREAM_PREFIX)`
      : "";
  return `${ready} turn(s) wait to run and no worker heartbeats under key prefix "${prefix}"${seen}: start a worker (\`turnstream worker\`) on this queue, or look at why yours stopped`;
}

function printReport(report: StatusReport): void {
  const counts = report.counts;
  // Worker entries, session and turn ids come from Redis, which others write: escaped for the terminal.
  const print = (s: string): boolean => process.stdout.write(`${forTerminal(s)}\n`);
  print(
    `queue: ${counts["waiting"] ?? 0} waiting, ${counts["active"] ?? 0} active, ${counts["delayed"] ?? 0} delayed (waiting their session's turn or a retry; ${counts["due"] ?? 0} due), ` +
      `${counts["completed"] ?? 0} completed, ${counts["failed"] ?? 0} failed`,
  );
  print(
    `oldest waiting turn: ${report.oldestWaitingAgeMs === null ? "none" : `queued ${formatAge(report.oldestWaitingAgeMs)} ago`}`,
  );
  print(`workers: ${report.workers.length}`);
  for (const worker of report.workers) {
    print(
      `  ${worker.id} (${worker.worker}, host ${worker.host}, pid ${worker.pid}, v${worker.version}): ${worker.slotsBusy}/${worker.slotsTotal} slots busy, ${worker.warmKept} warm kept, heartbeat ${formatAge(worker.heartbeatAgeMs)} ago`,
    );
  }
  if (report.running.length === 0) print("running: none");
  for (const turn of report.running)
    print(
      `running: session ${turn.session} turn ${turn.turn} attempt ${turn.attempt}${turn.startedAt ? ` since ${turn.startedAt}` : ""}`,
    );
  for (const warning of report.warnings) print(`warning: ${warning}`);
}
