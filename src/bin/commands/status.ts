// `turnstream status`: queue counts, how long the oldest waiting turn has waited, the turns parked on a
// supervised call and the oldest of them, the live workers of the registry with their slots, the turns
// running now, each tenant's running turns and spend against its budget, the model credentials the
// fleet is holding requests for (the gateways' cooldowns), and a warning when turns wait on no worker.
// Parked turns are not waiting to run: they wait for a person, holding nothing, so no worker is needed
// for them and they raise no warning.
import { forTerminal } from "../../kernel/index.ts";
import type { Queue } from "bullmq";
import type { RedisClient } from "../../log/index.ts";
import { countParked, readParkedEntries, type OperatorKeyring, type ParkedEntry } from "../../decisions/index.ts";
import { listCooldowns, type CooldownEntry } from "../../gateway/index.ts";
import { cooldownLines } from "./_cooldowns.ts";
import { closeTurnQueue, createTurnQueue, jobRow, readWaitingTurns } from "../../queue/index.ts";
import type { TenantRow } from "../../tenants/index.ts";
import { queueKeyOf, readWorkers, type WorkerEntry } from "../../worker/index.ts";
import { EXIT } from "../exit-codes.ts";
import { parseCommandArgs } from "./_args.ts";
import { logPrefix, QUEUE_FLAG_OPTIONS, QUEUE_FLAGS_USAGE, queueConfigOf, redisOrExplain } from "./_connect.ts";
import { formatAge } from "./_duration.ts";
import { trustedKeysFromEnv } from "./_operator.ts";
import { defaultScrub } from "./_scrub.ts";
import { nameText, readTenantRows, spentText, tenantArgProblem } from "./_tenants.ts";

export const summary =
  "queue counts, oldest waiting turn, parked turns, live workers, running turns, tenants' spend, model cooldowns, warnings";

interface RunningTurn {
  session: string;
  turn: string;
  attempt: number;
  startedAt: string | undefined;
  /** The turn's tenant as shown (escaped, scrubbed); null for a turn without one. */
  tenant: string | null;
}

type WorkerView = Omit<WorkerEntry, "boot"> & { heartbeatAgeMs: number };

interface StatusReport {
  counts: Record<string, number>;
  /** Since the oldest turn waiting to run was queued; null when none waits. */
  oldestWaitingAgeMs: number | null;
  /** Turns parked on a supervised call (decided ones until a worker resumes them). */
  parkedTurns: number;
  /** Of them, decided and waiting for a worker to resume them. */
  parkedDecided: number;
  /** How long the oldest parked turn has waited for its decision (since its request); null when none. */
  oldestParkedAgeMs: number | null;
  workers: WorkerView[];
  running: RunningTurn[];
  /** Each tenant (or the one --tenant names): running turns, spend against its budget, whether it is over. */
  tenants: TenantRow[];
  /** Credentials the upstream rate-limited, whose requests every worker's gateway holds now. */
  cooldowns: CooldownEntry[];
  warnings: string[];
}

const usage = `usage: turnstream status [--json] [--strict] [--tenant T] [--prefix P] [--queue-prefix Q] [--queue NAME]
  --json            one JSON object: counts, oldestWaitingAgeMs, parkedTurns, parkedDecided,
                    oldestParkedAgeMs, workers, running, tenants, cooldowns, warnings (tenants: the
                    rows of \`turnstream tenants --json\`; their limits verify against
                    TURNSTREAM_OPERATOR_KEYS when it is set here; cooldowns: fingerprint, until,
                    remainingMs, status, strikes, probes, probing, since)
  --strict          exit 3 when there is a warning (turns wait and no worker is alive); parked turns
                    wait for a decision, not a worker, and never make one (see \`turnstream pending\`)
  --tenant T        only tenant T in the tenants section and the running turns. The queue counts stay
                    the whole queue's: BullMQ keeps no count per tenant, and counting one tenant's
                    turns would read every job in the queue
${QUEUE_FLAGS_USAGE}`;

export async function run(argv: string[]): Promise<number> {
  const options = {
    json: { type: "boolean" },
    strict: { type: "boolean" },
    tenant: { type: "string" },
    ...QUEUE_FLAG_OPTIONS,
    help: { type: "boolean", short: "h" },
  } as const;
  const args = parseCommandArgs("status", usage, { args: argv, options });
  if (typeof args === "number") return args;
  const { values } = args;
  const tenantProblem = values.tenant === undefined ? undefined : tenantArgProblem(values.tenant);
  if (tenantProblem !== undefined) {
    process.stderr.write(`turnstream status: --tenant: ${tenantProblem}\n`);
    return EXIT.usage;
  }
  const redis = await redisOrExplain("status");
  if (redis === undefined) return EXIT.infrastructure;
  const queue = createTurnQueue({ redis, ...queueConfigOf(values) });
  try {
    const report = await gather(queue, redis, logPrefix(values.prefix), values.tenant);
    if (values.json) process.stdout.write(`${JSON.stringify(report)}\n`);
    else printReport(report, values.tenant !== undefined);
    return values.strict === true && report.warnings.length > 0 ? EXIT.infrastructure : EXIT.finished;
  } finally {
    await closeTurnQueue(queue);
    redis.disconnect();
  }
}

/**
 * The keys tenants' limits are checked against. Keys that do not parse are said on stderr and status
 * goes on without them: not a warning of the fleet's, which --strict would turn into exit 3.
 */
function tenantKeyring(): OperatorKeyring | undefined {
  try {
    return trustedKeysFromEnv();
  } catch (err) {
    process.stderr.write(`turnstream status: ${(err as Error).message}; tenants' limits are shown unchecked\n`);
    return undefined;
  }
}

async function gather(
  queue: Queue,
  redis: RedisClient,
  prefix: string,
  tenant: string | undefined,
): Promise<StatusReport> {
  const now = Date.now();
  const queueKey = queueKeyOf(queue.opts.prefix ?? "", queue.name);
  const parkedEntries = await readParkedEntries(redis, prefix);
  const parked = countParked(parkedEntries, now);
  const keyring = tenantKeyring();
  const [counts, registered, active, waiting, connections, parkedReady, tenants, cooldowns] = await Promise.all([
    queue.getJobCounts("waiting", "active", "delayed", "prioritized", "completed", "failed"),
    readWorkers(redis, prefix),
    queue.getActive(0, 999),
    readWaitingTurns(queue, now, parked.turns),
    // CLIENT LIST, which an ACL may refuse: only a hint for the warning.
    queue.getWorkersCount().catch(() => undefined),
    parkedJobsReady(queue, parkedEntries, now),
    readTenantRows(redis, prefix, keyring, tenant === undefined ? undefined : [tenant]),
    listCooldowns(redis, prefix),
  ]);
  // Workers of other queues under the same prefix do not serve this one (entries of older workers
  // name no queue: they are counted, as before).
  const servesQueue = (entry: WorkerEntry): boolean => entry.queue === undefined || entry.queue === queueKey;
  const workers = registered.filter(servesQueue).map(({ boot: _boot, ...entry }) => ({
    ...entry,
    heartbeatAgeMs: Math.max(0, now - Date.parse(entry.beatAt)),
  }));
  const scrub = defaultScrub();
  const running: RunningTurn[] = active
    .filter((job) => tenant === undefined || tenantOf(job.data) === tenant)
    .map((job) => {
      const { session, turn, attempt, startedAt } = jobRow(job, "active");
      const of = tenantOf(job.data);
      return { session, turn, attempt, startedAt, tenant: of === undefined ? null : forTerminal(scrub(of)) };
    });
  const report: StatusReport = {
    // Turns are queued with priorities (fair share between tenants): `waiting` counts every turn
    // ready to be taken, `prioritized` says how many of them BullMQ keeps in its priority set.
    counts: { ...counts, waiting: (counts["waiting"] ?? 0) + (counts["prioritized"] ?? 0), due: waiting.dueDelayed },
    oldestWaitingAgeMs: waiting.oldestQueuedAt === undefined ? null : Math.max(0, now - waiting.oldestQueuedAt),
    parkedTurns: parked.count,
    parkedDecided: parked.decided,
    oldestParkedAgeMs: parked.oldestAgeMs ?? null,
    workers,
    running: running.sort((a, b) => a.session.localeCompare(b.session)),
    tenants,
    cooldowns,
    warnings: [],
  };
  const ready = (counts["waiting"] ?? 0) + (counts["prioritized"] ?? 0) + waiting.dueDelayed - parkedReady;
  if (ready > 0 && workers.length === 0) report.warnings.push(noWorkerWarning(ready, prefix, connections));
  return report;
}

/** The tenant a job's data names (a job is written by producers, but anyone who can write Redis can edit it). */
function tenantOf(data: unknown): string | undefined {
  const tenant = (data as { tenant?: unknown } | undefined)?.tenant;
  return typeof tenant === "string" ? tenant : undefined;
}

/**
 * How many parked turns' jobs the queue counts as ready to run: woken for a decision (waiting), or
 * past their deadline (a due delayed job). Their turns wait for a decision, not for a worker.
 */
async function parkedJobsReady(queue: Queue, parked: readonly ParkedEntry[], now: number): Promise<number> {
  const states = await Promise.all(parked.map((entry) => queue.getJobState(entry.turn)));
  return states.filter(
    (state, index) =>
      state === "waiting" ||
      state === "prioritized" ||
      (state === "delayed" && Date.parse(parked[index]!.expiresAt) <= now),
  ).length;
}

function noWorkerWarning(ready: number, prefix: string, connections: number | undefined): string {
  const seen =
    connections !== undefined && connections > 0
      ? ` (the queue has ${connections} worker connection(s): check that those workers use key prefix "${prefix}", TURNSTREAM_PREFIX)`
      : "";
  return `${ready} turn(s) wait to run and no worker heartbeats under key prefix "${prefix}"${seen}: start a worker (\`turnstream worker\`) on this queue, or look at why yours stopped`;
}

/** `narrowed`: --tenant narrowed the tenants and running turns, not the queue counts (said on their line). */
function printReport(report: StatusReport, narrowed: boolean): void {
  const counts = report.counts;
  // Worker entries, session and turn ids come from Redis, which others write: escaped for the terminal.
  const print = (s: string): boolean => process.stdout.write(`${forTerminal(s)}\n`);
  print(
    `queue${narrowed ? " (all tenants)" : ""}: ${counts["waiting"] ?? 0} waiting, ${counts["active"] ?? 0} active, ${counts["delayed"] ?? 0} delayed (waiting their session's turn or a retry; ${counts["due"] ?? 0} due), ` +
      `${counts["completed"] ?? 0} completed, ${counts["failed"] ?? 0} failed`,
  );
  print(
    `oldest waiting turn: ${report.oldestWaitingAgeMs === null ? "none" : `queued ${formatAge(report.oldestWaitingAgeMs)} ago`}`,
  );
  print(parkedLine(report));
  print(`workers: ${report.workers.length}`);
  for (const worker of report.workers) {
    print(
      `  ${worker.id} (${worker.worker}, host ${worker.host}, pid ${worker.pid}, v${worker.version}): ${worker.slotsBusy}/${worker.slotsTotal} slots busy, ${worker.warmKept} warm kept, heartbeat ${formatAge(worker.heartbeatAgeMs)} ago${worker.draining ? ", draining (shutting down)" : ""}`,
    );
  }
  if (report.running.length === 0) print("running: none");
  for (const turn of report.running)
    print(
      `running: session ${turn.session} turn ${turn.turn} attempt ${turn.attempt}${turn.startedAt ? ` since ${turn.startedAt}` : ""}${turn.tenant === null ? "" : ` (tenant ${turn.tenant})`}`,
    );
  printTenants(report.tenants, print);
  for (const line of cooldownLines(report.cooldowns)) print(line);
  for (const warning of report.warnings) print(`warning: ${warning}`);
}

/** Tenants printed in text; the rest are counted (\`turnstream tenants\` lists them all). */
const TENANT_LINES = 50;

function printTenants(tenants: readonly TenantRow[], print: (line: string) => void): void {
  if (tenants.length === 0) return void print("tenants: none");
  print(`tenants: ${tenants.length} (\`turnstream tenants\` shows their limits)`);
  for (const row of tenants.slice(0, TENANT_LINES)) print(`  ${tenantLine(row)}`);
  if (tenants.length > TENANT_LINES) print(`  … and ${tenants.length - TENANT_LINES} more`);
}

/** `acme/api: 1 running (at most 4), $12.34 of $50.00 (24.7%) spent in 24 h, over budget: no`. */
function tenantLine(row: TenantRow): string {
  const running = `${row.running} running${row.maxRunning === null ? "" : ` (at most ${row.maxRunning})`}`;
  return `${nameText(row)}: ${running}, ${spentText(row)} spent in 24 h, ${overBudgetText(row)}`;
}

function overBudgetText(row: TenantRow): string {
  switch (row.limits) {
    case "none":
      return "limits: the workers' defaults";
    case "fails":
      return "limits DO NOT VERIFY: its turns fail (tenant_limits)";
    case "verified":
    case "unchecked": {
      const over = row.budgetUsd === null ? "no (no budget)" : row.overBudget === true ? "YES" : "no";
      return `over budget: ${over}${row.limits === "unchecked" ? " (limits unchecked)" : ""}`;
    }
  }
}

function parkedLine(report: StatusReport): string {
  if (report.parkedTurns === 0) return "parked turns: none";
  const oldest =
    report.oldestParkedAgeMs === null
      ? ""
      : `, the oldest waiting ${formatAge(report.oldestParkedAgeMs)} for a decision`;
  const decided =
    report.parkedDecided === 0 ? "" : `; ${report.parkedDecided} decided, waiting for a worker to resume them`;
  return `parked turns: ${report.parkedTurns}${oldest}${decided} (\`turnstream pending\` lists the undecided)`;
}
