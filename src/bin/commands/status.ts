// `turnstream status`: queue counts, how long the oldest waiting turn has waited, the live workers of
// the registry with their slots, the turns running now, and a warning when turns wait on no worker.
import { forTerminal } from "../../kernel/index.ts";
import type { Queue } from "bullmq";
import type { RedisClient } from "../../log/index.ts";
import { closeTurnQueue, createTurnQueue, jobRow, readWaitingTurns } from "../../queue/index.ts";
import { readWorkers, type WorkerEntry } from "../../worker/registry.ts";
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
  const workers = registered.map(({ boot: _boot, ...w }) => ({
    ...w,
    heartbeatAgeMs: Math.max(0, now - Date.parse(w.beatAt)),
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

function printReport(r: StatusReport): void {
  const c = r.counts;
  // Worker entries, session and turn ids come from Redis, which others write: escaped for the terminal.
  const w = (s: string): boolean => process.stdout.write(`${forTerminal(s)}\n`);
  w(
    `queue: ${c["waiting"] ?? 0} waiting, ${c["active"] ?? 0} active, ${c["delayed"] ?? 0} delayed (waiting their session's turn or a retry; ${c["due"] ?? 0} due), ` +
      `${c["completed"] ?? 0} completed, ${c["failed"] ?? 0} failed`,
  );
  w(`oldest waiting turn: ${r.oldestWaitingAgeMs === null ? "none" : `queued ${formatAge(r.oldestWaitingAgeMs)} ago`}`);
  w(`workers: ${r.workers.length}`);
  for (const x of r.workers) {
    w(
      `  ${x.id} (${x.worker}, host ${x.host}, pid ${x.pid}, v${x.version}): ${x.slotsBusy}/${x.slotsTotal} slots busy, ${x.warmKept} warm kept, heartbeat ${formatAge(x.heartbeatAgeMs)} ago`,
    );
  }
  if (r.running.length === 0) w("running: none");
  for (const t of r.running)
    w(`running: session ${t.session} turn ${t.turn} attempt ${t.attempt}${t.startedAt ? ` since ${t.startedAt}` : ""}`);
  for (const warning of r.warnings) w(`warning: ${warning}`);
}
