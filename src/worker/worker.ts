// The turn worker: a BullMQ worker whose processor is executeTurnJob, plus what a process needs
// around it: lock-loss handling, bounded shutdown (stop taking jobs, let running turns finish within
// a grace period, then end them and record their attempts abandoned), and connection cleanup.
import { join } from "node:path";
import { Worker, type Job, type Queue } from "bullmq";
import { errorReporter, silentLogger, type Logger } from "../kernel/index.ts";
import { createEventLog, type EventLog, type RedisClient } from "../log/index.ts";
import { bullConnection, createTurnQueue, reportBullErrors, SessionOrder } from "../queue/index.ts";
import { CREDENTIALS_FILE, modelAccessEnv, operatorConfigDir } from "../runner/index.ts";
import type { EventObserver } from "../events/index.ts";
import { attemptSpansObserver, createScrubber, scrubError, type Scrubber, type Telemetry } from "../telemetry/index.ts";
import { startDecisionHub, sweepSupervisedDirs, type DecisionHub } from "../decisions/index.ts";
import { CliSlots } from "./cli-slots.ts";
import { WorkerCliTelemetry } from "./cli-telemetry.ts";
import { queueKeyOf, startHeartbeat, type Heartbeat } from "./registry.ts";
import { cliVersionReader } from "./cli-version.ts";
import { executeTurnJob } from "./execute.ts";
import { checkBrokerable, WorkerModelAccess, workerGatewayPolicy } from "./model-access.ts";
import { renewEveryMs } from "./lease-keeper.ts";
import { compileWorkerOptions, type TurnWorkerOptions, type WorkerSettings } from "./options.ts";
import { SnapshotCache } from "./snapshots.ts";
import { WarmSessions, type WarmWatch } from "./warm.ts";
import type { ExecuteDeps, RunningTurn, TurnJobResult } from "./types.ts";
import { announceToolSandbox } from "./tool-sandbox.ts";
import { startParkedWaker, type ParkedWaker } from "./parked-waker.ts";
import { tenantGatewayPolicy, workerTenants } from "./tenancy.ts";

export interface TurnWorker {
  readonly id: string;
  readonly worker: Worker;
  /** Turns running now. */
  readonly active: number;
  /** CLIs running now (`busy`) of the `size` the worker may run at once. */
  readonly slots: { readonly busy: number; readonly size: number };
  /** Idle CLI processes kept for warm sessions' next turns. */
  readonly warm: { readonly kept: number };
  /**
   * True while another process (another boot token) heartbeats under this worker's instance id in
   * the registry: two processes must never run as one instance. Logged as an error when it starts.
   */
  readonly instanceTaken: boolean;
  /** @deprecated The older name of `instanceTaken`. */
  readonly fenced: boolean;
  /** Resolves once the worker's connections are ready. */
  ready(): Promise<void>;
  /**
   * Stops taking jobs, waits up to `graceMs` (default 30 s) for running turns, then ends the rest
   * (their trees are killed, their attempts recorded abandoned, their jobs handed back), and closes.
   * Bounded by about graceMs + killGraceMs + closeTimeoutMs even when Redis is unreachable.
   */
  close(options?: { graceMs?: number; closeTimeoutMs?: number }): Promise<void>;
}

/** Waits for `p` to settle, at most `ms`: true when it did. */
export function boundedWait(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    const done = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    promise.then(done, done);
  });
}

/**
 * Starts a turn worker on the queue: each job leases its session, runs the CLI, appends every line to the log,
 * snapshots the session and ends the turn.
 */
export function startTurnWorker(options: TurnWorkerOptions): TurnWorker {
  const settings = compileWorkerOptions(options);
  checkBrokerable(settings.gateway, { ...process.env, ...settings.runEnv });
  const logger = options.logger ?? silentLogger;
  announceToolSandbox(settings.toolSandbox, logger);
  const log = workerLog(options, settings, logger);
  const queue = createTurnQueue({
    redis: options.redis,
    queuePrefix: settings.queuePrefix,
    queueName: settings.queueName,
    logger,
  });
  const { scrubber, lineScrubber } = workerScrubbers(options, settings, logger);
  const hub = lazyDecisionHub(options.redis, log, settings, logger, scrubber);
  const deps = executeDeps(options, { settings, logger, log, queue, scrubber, lineScrubber, hub });
  const connection = bullConnection(options.redis);
  const { worker, slots } = startBullWorker(queue.name, deps, connection);
  watchBullWorker(worker, connection, deps);
  const heartbeat = workerHeartbeat(options.redis, settings, logger, slots, deps.warm);
  const waker = settings.parking.enabled
    ? startParkedWaker({
        redis: options.redis,
        order: deps.order,
        prefix: settings.logPrefix,
        queueName: queue.name,
        sweepMs: settings.parking.sweepMs,
        logger,
      })
    : undefined;
  return turnWorkerHandle({
    waker,
    worker,
    slots,
    queue,
    connection,
    running: deps.running,
    settings,
    logger,
    telemetry: options.telemetry,
    hub,
    heartbeat,
    warm: deps.warm,
    access: deps.access,
    cliTelemetry: deps.cliTelemetry,
  });
}

/** What startTurnWorker has built before the turns' dependencies: the parts executeDeps puts together. */
interface DepsParts {
  settings: WorkerSettings;
  logger: Logger;
  log: EventLog;
  queue: Queue;
  scrubber: Scrubber;
  lineScrubber: Scrubber;
  hub: LazyHub;
}

/**
 * What every turn the worker runs shares: its log, session order, scrubbers, caches, kept processes and model access.
 */
function executeDeps(options: TurnWorkerOptions, parts: DepsParts): ExecuteDeps {
  const { settings, logger, log, queue } = parts;
  const running = new Map<string, RunningTurn>();
  const tenants = workerTenants(options.redis, settings);
  const own = tenantGatewayPolicy(tenants, logger);
  return {
    log,
    order: new SessionOrder({ redis: options.redis, logPrefix: settings.logPrefix, queue }),
    settings,
    logger,
    scrubber: parts.scrubber,
    lineScrubber: parts.lineScrubber,
    observers: workerObservers(options),
    running,
    decisionHub: parts.hub.get,
    snapshots: settings.snapshotCacheBytes === 0 ? undefined : new SnapshotCache(settings.snapshotCacheBytes),
    warm: new WarmSessions(settings.warm, warmWatch(log, running, settings.leaseMs), logger),
    cliVersion: cliVersionReader(settings.claudeBin, { ...process.env, ...settings.runEnv }, logger),
    // Started with the worker, closed with it (closeWorker), after its runs have ended.
    access:
      settings.gateway === "broker"
        ? new WorkerModelAccess(
            settings,
            workerGatewayPolicy(options.redis, settings, [own, options.gatewayPolicy], logger),
            logger,
          )
        : undefined,
    tenants,
    cliTelemetry: workerCliTelemetry(options, settings, logger),
  };
}

/** The worker's telemetry when it traces: one given but switched off counts as none. */
function tracingTelemetry(options: TurnWorkerOptions): Telemetry | undefined {
  return options.telemetry?.enabled === true ? options.telemetry : undefined;
}

/**
 * The receiver of the CLIs' own spans and metrics: only while the worker traces or keeps metrics, and
 * TURNSTREAM_CLI_TELEMETRY is on.
 */
function workerCliTelemetry(
  options: TurnWorkerOptions,
  settings: WorkerSettings,
  logger: Logger,
): WorkerCliTelemetry | undefined {
  const telemetry = tracingTelemetry(options);
  const metrics = options.cliMetrics;
  if ((telemetry === undefined && metrics === undefined) || !settings.cliTelemetry.enabled) return undefined;
  return new WorkerCliTelemetry({ telemetry, metrics }, settings.cliTelemetry.content, logger);
}

/** The BullMQ worker on the turn queue, and the CLI slots its jobs hold while their CLIs run. */
function startBullWorker(
  queueName: string,
  deps: ExecuteDeps,
  connection: RedisClient,
): { worker: Worker; slots: CliSlots } {
  const { settings } = deps;
  // The slots watch the worker, so they are made after it; the processor looks them up per job.
  let slots: CliSlots | undefined;
  const worker = new Worker(
    queueName,
    scrubbedProcessor(deps, () => slots),
    {
      connection: connection as never,
      prefix: settings.queuePrefix,
      concurrency: settings.concurrency,
      lockDuration: settings.lockDuration,
      stalledInterval: settings.stalledInterval,
      maxStalledCount: settings.maxStalledCount,
      autorun: settings.autorun,
    },
  );
  slots = new CliSlots(worker, settings.concurrency);
  return { worker, slots };
}

/** A lost job lock stops its turn; BullMQ's errors and failed jobs are logged. */
function watchBullWorker(worker: Worker, connection: RedisClient, deps: ExecuteDeps): void {
  const { logger } = deps;
  const id = deps.settings.workerId;
  worker.on("lockRenewalFailed", (jobIds: string[]) => {
    for (const jobId of jobIds) deps.running.get(jobId)?.stop("lock_lost");
  });
  // Both of BullMQ's connections (its commands' and its blocking reads') report here; an outage
  // repeats one error per reconnect, so repeats are counted, not logged.
  reportBullErrors(worker, connection, errorReporter(logger), "queue worker error", { worker: id });
  worker.on("failed", (job, err) => {
    if (job !== undefined) logger.info({ worker: id, jobId: job.id, err: { message: err.message } }, "turn job failed");
  });
}

/** The TurnWorker callers hold: live counts read from the parts, and a close that runs once. */
function turnWorkerHandle(parts: WorkerParts): TurnWorker {
  const { worker, slots, settings, heartbeat, running, warm, access } = parts;
  let closing: Promise<void> | undefined;
  return {
    id: settings.workerId,
    worker,
    get active() {
      return running.size;
    },
    slots: {
      get busy() {
        return slots.busy;
      },
      size: settings.concurrency,
    },
    warm: {
      get kept() {
        return warm.kept;
      },
    },
    get instanceTaken() {
      return heartbeat.instanceTaken;
    },
    get fenced() {
      return heartbeat.instanceTaken;
    },
    // Ready once registered too, so `turnstream status` lists a worker that says it is ready.
    ready: () =>
      Promise.all([worker.waitUntilReady(), heartbeat.first, access?.ready(), parts.cliTelemetry?.ready()]).then(
        () => undefined,
      ),
    close: (opts = {}) => (closing ??= closeWorker(parts, opts.graceMs ?? 30_000, opts.closeTimeoutMs ?? 5000)),
  };
}

/** The worker's event log, acknowledging appends at the worker's durability level. */
function workerLog(options: TurnWorkerOptions, settings: WorkerSettings, logger: Logger): EventLog {
  const { logPrefix: prefix, durability } = settings;
  return createEventLog({ redis: options.redis, prefix, logger, onAppend: options.onLogAppend, durability });
}

/**
 * The worker's scrubbers: the caller's (or one over process.env) for logs, spans, stderr, errors and
 * job records, and one for raw CLI lines with the known values and the built-in patterns, which keep
 * a JSON line valid (not the caller's, whose hook or extra patterns might not). Both learn the
 * secret-looking variables of secretEnv, runEnv and the runs' model access, the registered values and the
 * operator's credentials.
 */
function workerScrubbers(
  options: TurnWorkerOptions,
  settings: WorkerSettings,
  logger: Logger,
): { scrubber: Scrubber; lineScrubber: Scrubber } {
  const scrubber = options.scrubber ?? createScrubber({ env: process.env });
  const lineScrubber = createScrubber({ env: process.env });
  for (const target of [scrubber, lineScrubber]) {
    // The model access the worker gives its runs, whatever scrubber the caller brought.
    target.addEnv(settings.secretEnv).addEnv(settings.runEnv).addEnv(modelAccessEnv(settings.hostEnv));
    if (options.secretValues !== undefined) target.addValues(options.secretValues);
    try {
      target.addCredentialFile(join(operatorConfigDir({ ...process.env, ...settings.secretEnv }), CREDENTIALS_FILE));
    } catch (err) {
      logger.warn(
        { err: { message: (err as Error).message } },
        "could not read the operator's credential file for scrubbing",
      );
    }
  }
  return { scrubber, lineScrubber };
}

/** The worker's registry entry under its instance id, with its CLI slots and kept warm processes. */
function workerHeartbeat(
  redis: RedisClient,
  settings: WorkerSettings,
  logger: Logger,
  slots: CliSlots,
  warm: WarmSessions,
): Heartbeat {
  return startHeartbeat({
    redis,
    prefix: settings.logPrefix,
    id: settings.instanceId,
    worker: settings.workerId,
    queue: queueKeyOf(settings.queuePrefix, settings.queueName),
    intervalMs: settings.heartbeatMs,
    load: () => ({
      slotsBusy: slots.busy,
      slotsTotal: settings.concurrency,
      warmKept: warm.kept,
      draining: slots.draining,
    }),
    logger,
  });
}

/** Kept warm processes are checked against their sessions' epochs as often as a lease is renewed. */
function warmWatch(log: EventLog, running: Map<string, RunningTurn>, leaseMs: number): WarmWatch {
  return {
    epochOf: async (session) => (await log.stat(session)).epoch,
    runningHere: (session) => [...running.values()].some((r) => r.session === session),
    everyMs: renewEveryMs(leaseMs),
  };
}

/**
 * Attempt spans first (when the worker has a tracer), then the caller's observers. The session's own
 * span goes out through the worker's telemetry (Telemetry.emit), when that is what traces.
 */
function workerObservers(options: TurnWorkerOptions): EventObserver[] {
  const telemetry = tracingTelemetry(options);
  const tracer = options.tracer ?? telemetry?.tracer;
  const emit = options.tracer === undefined ? telemetry?.emit : undefined;
  const spans = tracer === undefined ? [] : [attemptSpansObserver({ tracer, emit })];
  return [...spans, ...(options.observers ?? [])];
}

interface LazyHub {
  get(): Promise<DecisionHub>;
  /** The hub, if it was started. */
  started(): Promise<DecisionHub> | undefined;
}

/**
 * Started on the first supervised turn: most workers never need the loopback hub. Its start also
 * removes the run folders (tokens, hook settings) that SIGKILLed workers' hubs left behind.
 */
function lazyDecisionHub(
  redis: RedisClient,
  log: EventLog,
  settings: WorkerSettings,
  logger: Logger,
  scrubber: Scrubber,
): LazyHub {
  let hub: Promise<DecisionHub> | undefined;
  return {
    get() {
      if (hub === undefined) sweepSupervisedDirs({ logger });
      return (hub ??= startDecisionHub({
        log,
        redis,
        prefix: settings.logPrefix,
        logger,
        scrubber,
        operatorKeys: settings.operatorKeys,
        answerWindowMs: settings.parking.answerWindowMs,
      }));
    },
    started: () => hub,
  };
}

/**
 * The BullMQ processor: what BullMQ stores (return value, failed reason, stack trace, progress) passes the scrubber.
 */
function scrubbedProcessor(deps: ExecuteDeps, slots: () => CliSlots | undefined) {
  const { scrubber } = deps;
  return async (job: Job, token: string | undefined, signal?: AbortSignal): Promise<TurnJobResult> => {
    const updateProgress = job.updateProgress.bind(job);
    job.updateProgress = (progress) => updateProgress(scrubber.scrubDeep(progress, { sink: "job" }));
    const slot = slots()?.hold();
    try {
      return scrubber.scrubDeep(await executeTurnJob(deps, job, token, signal, slot), { sink: "job" });
    } catch (err) {
      throw scrubError(err, scrubber);
    } finally {
      slot?.done();
    }
  };
}

interface WorkerParts {
  worker: Worker;
  /** Takes wake-ups of decided parked turns (undefined with parking off). */
  waker: ParkedWaker | undefined;
  slots: CliSlots;
  queue: Queue;
  connection: RedisClient;
  running: Map<string, RunningTurn>;
  settings: WorkerSettings;
  logger: Logger;
  telemetry: Telemetry | undefined;
  hub: LazyHub;
  heartbeat: Heartbeat;
  warm: WarmSessions;
  access: WorkerModelAccess | undefined;
  cliTelemetry: WorkerCliTelemetry | undefined;
}

/**
 * Stops taking jobs, lets running turns finish within graceMs, ends the rest, and closes the connections, each wait
 * bounded.
 */
async function closeWorker(parts: WorkerParts, graceMs: number, closeTimeoutMs: number): Promise<void> {
  const { worker, running, logger } = parts;
  const id = parts.settings.workerId;
  logger.info({ worker: id, running: running.size, graceMs }, "worker shutting down");
  // Parked turns it would wake stay parked: another worker, or this one's successor, wakes them.
  parts.waker?.stop();
  // A job that has not started its CLI yet hands its turn back now instead of starting one.
  parts.slots.close();
  // Said at once, not at the next beat: operators see which workers are going.
  void parts.heartbeat.beatNow();
  // Not force: BullMQ stops fetching and waits for the processors, which we end below.
  const closed = worker.close();
  closed.catch(() => undefined);
  // With nothing running there is nothing to wait for but BullMQ itself (which hangs while Redis
  // is unreachable), so an idle worker does not spend its grace period.
  const idle = running.size === 0;
  if (!(await boundedWait(closed, idle ? Math.min(graceMs, closeTimeoutMs) : graceMs))) {
    for (const turn of running.values()) turn.stop("shutdown");
    if (idle || !(await boundedWait(closed, parts.settings.killGraceMs + closeTimeoutMs))) {
      logger.warn({ worker: id }, "worker did not close in time; forcing");
      if (!(await boundedWait(worker.close(true), 1000))) {
        // BullMQ's own connections retry forever and their timers would keep the process alive.
        void worker.disconnect().catch(() => undefined);
      }
    }
  }
  // Kept processes answer only this worker's turns; once it stops taking jobs they are of no use.
  await boundedWait(parts.warm.closeAll(), parts.settings.killGraceMs + closeTimeoutMs);
  // Every run has ended: the gateway revokes what tokens are left and stops listening.
  if (parts.access !== undefined) await boundedWait(parts.access.closeAll(), closeTimeoutMs);
  if (parts.cliTelemetry !== undefined) await boundedWait(parts.cliTelemetry.closeAll(), closeTimeoutMs);
  if (parts.telemetry !== undefined) await boundedWait(parts.telemetry.forceFlush(), closeTimeoutMs);
  if (!(await boundedWait(parts.queue.close(), closeTimeoutMs))) void parts.queue.disconnect().catch(() => undefined);
  // Listed as live until its turns have ended; the entry goes before the connections do.
  await boundedWait(parts.heartbeat.stop(), 1000);
  const hub = parts.hub.started();
  if (hub !== undefined)
    await boundedWait(
      hub.then((h) => h.close()),
      closeTimeoutMs,
    );
  for (const client of [parts.connection, parts.queue.opts.connection as RedisClient]) {
    if (!(await boundedWait(client.quit(), 1000))) client.disconnect();
  }
}
