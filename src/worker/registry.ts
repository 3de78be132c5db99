// The worker registry: every worker heartbeats an entry under the log prefix, so `turnstream status`
// can tell a fleet that is alive from turns waiting on nobody, and two processes started with the
// same instance id notice each other. An entry expires a few beats after its worker stops beating
// (a crash, a partition) and is removed on a clean close. The entry holds what an operator needs to
// find the process (host, pid, slots, version), never anything secret.
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { errorReporter, packageVersion, type ErrorReporter, type Logger } from "../kernel/index.ts";
import { luaScript, scriptCommand, type RedisClient } from "../log/index.ts";

const HEARTBEAT = luaScript("turnstreamWorkerHeartbeat", 2, new URL("./lua/heartbeat.lua", import.meta.url));
const UNREGISTER = luaScript("turnstreamWorkerUnregister", 2, new URL("./lua/unregister.lua", import.meta.url));

/** Default beat interval; an entry lives for HEARTBEAT_TTL_BEATS of them. */
export const DEFAULT_HEARTBEAT_MS = 5000;
/** Beats an entry outlives its last one by: a beat or two lost to a busy Redis is not a death. */
export const HEARTBEAT_TTL_BEATS = 3;

/** The registry's keys: one hash tag, so the entries and their index sit in one cluster slot. */
export function registryKeys(prefix: string): { live: string; entry(id: string): string } {
  return { live: `${prefix}{workers}:live`, entry: (id) => `${prefix}{workers}:w:${id}` };
}

/** What a worker is doing, as of its last beat. */
export interface WorkerLoad {
  /** CLIs running now, and the worker's concurrency. */
  slotsBusy: number;
  slotsTotal: number;
  /** Idle CLI processes kept for warm sessions' next turns. */
  warmKept: number;
  /** The worker is shutting down: it takes no new turn and lets its running ones finish. */
  draining: boolean;
}

/** One live worker as its entry says. */
export interface WorkerEntry extends WorkerLoad {
  /** The instance id the entry is registered under. */
  id: string;
  /** The worker's id in leases, attempts and logs. */
  worker: string;
  host: string;
  pid: number;
  startedAt: string;
  /** When the entry was last written. */
  beatAt: string;
  version: string;
  /** Random per process: tells two processes under one instance id apart. */
  boot: string;
  /** The queue the worker takes turns from (`<queue prefix>:<name>`); undefined in entries of older workers. */
  queue: string | undefined;
}

export interface HeartbeatOptions {
  redis: RedisClient;
  prefix: string;
  /** The instance id: one live process per id. */
  id: string;
  worker: string;
  /** The queue it takes turns from, `<queue prefix>:<name>` (queueKeyOf). */
  queue: string;
  intervalMs?: number;
  /** Read at each beat. */
  load(): WorkerLoad;
  logger: Logger;
}

export interface Heartbeat {
  /** True while another process (another boot token) holds this instance id's entry. */
  readonly instanceTaken: boolean;
  /** Settles after the first beat (written, refused or failed: it never rejects). */
  readonly first: Promise<void>;
  /** Beats now (the worker's load changed, as when it starts draining). Never rejects. */
  beatNow(): Promise<void>;
  /** Stops beating and removes the entry if it is still this process's. Never rejects. */
  stop(): Promise<void>;
}

/** Starts beating at once and then every intervalMs; the timer never keeps the process alive. */
export function startHeartbeat(options: HeartbeatOptions): Heartbeat {
  const keys = registryKeys(options.prefix);
  const beatScript = scriptCommand<string[]>(options.redis, HEARTBEAT);
  const intervalMs = options.intervalMs ?? DEFAULT_HEARTBEAT_MS;
  const ttl = intervalMs * HEARTBEAT_TTL_BEATS;
  const boot = randomBytes(12).toString("hex");
  const fixed = {
    id: options.id,
    worker: options.worker,
    host: hostname(),
    pid: String(process.pid),
    startedAt: new Date().toISOString(),
    version: packageVersion(),
    boot,
    queue: options.queue,
  };
  const state = new BeatState(options.logger, options.id);
  let inFlight: Promise<void> | undefined;
  const beat = (): Promise<void> => {
    // A beat still waiting on a slow Redis is not doubled up.
    if (inFlight !== undefined) return inFlight;
    const { slotsBusy, slotsTotal, warmKept, draining } = options.load();
    const load = {
      slotsBusy: String(slotsBusy),
      slotsTotal: String(slotsTotal),
      warmKept: String(warmKept),
      draining: draining ? "1" : "0",
    };
    const fields = { ...fixed, ...load, beatAt: new Date().toISOString() };
    const now = Date.now();
    inFlight = beatScript(
      [keys.entry(options.id), keys.live],
      [boot, ttl, now, options.id, ...Object.entries(fields).flat()],
    )
      .then(
        (reply) => state.replied(reply),
        (err: unknown) => state.failed(err),
      )
      .finally(() => (inFlight = undefined));
    return inFlight;
  };
  const first = beat();
  const timer = setInterval(() => void beat(), intervalMs);
  timer.unref();
  return {
    get instanceTaken() {
      return state.instanceTaken;
    },
    first,
    beatNow: beat,
    async stop() {
      clearInterval(timer);
      // Unreachable Redis: nothing to wait for, since the entry expires on its own.
      if (options.redis.status !== "ready") {
        options.logger.warn(
          { instance: options.id },
          "could not remove the worker's registry entry (Redis is not connected); it expires on its own",
        );
        return;
      }
      await inFlight;
      try {
        await scriptCommand<number>(options.redis, UNREGISTER)([keys.entry(options.id), keys.live], [boot, options.id]);
      } catch (err) {
        // The entry expires on its own.
        options.logger.warn(
          { instance: options.id, err: { message: (err as Error).message } },
          "could not remove the worker's registry entry; it expires on its own",
        );
      }
    },
  };
}

/**
 * What the beats learned: whether another process holds the instance id, each change logged once;
 * failures, repeats counted rather than logged.
 */
class BeatState {
  instanceTaken = false;
  private failingSince: number | undefined;
  private readonly logger: Logger;
  private readonly id: string;
  // A Redis that stays down would otherwise log every beat.
  private readonly report: ErrorReporter;

  constructor(logger: Logger, id: string) {
    this.logger = logger;
    this.id = id;
    this.report = errorReporter(logger);
  }

  replied(reply: string[]): void {
    if (this.failingSince !== undefined) {
      this.logger.info(
        { instance: this.id, failedForMs: Date.now() - this.failingSince },
        "worker heartbeat written again",
      );
      this.failingSince = undefined;
    }
    const taken = reply[0] === "taken";
    if (taken && !this.instanceTaken) {
      const [, worker, host, pid] = reply;
      this.logger.error(
        { instance: this.id, other: { worker, host, pid: Number(pid) } },
        "another process is running as this instance: give each worker process its own instance id (TURNSTREAM_INSTANCE_ID)",
      );
    } else if (!taken && this.instanceTaken) {
      this.logger.info({ instance: this.id }, "this process holds its instance id again");
    }
    this.instanceTaken = taken;
  }

  failed(err: unknown): void {
    this.failingSince ??= Date.now();
    this.report("worker heartbeat failed", err, { instance: this.id });
  }
}

/** The live workers under a log prefix, by instance id. Expired entries are not listed. */
/** How a registry entry names a queue: its prefix and name, as BullMQ's keys start. */
export const queueKeyOf = (queuePrefix: string, queueName: string): string => `${queuePrefix}:${queueName}`;

export async function readWorkers(redis: RedisClient, prefix: string): Promise<WorkerEntry[]> {
  const keys = registryKeys(prefix);
  // Every member whose entry may still live; the entries themselves are the truth (their TTL).
  const ids = await redis.zrange(keys.live, 0, -1);
  const hashes = await Promise.all(ids.map((id) => redis.hgetall(keys.entry(id))));
  const out: WorkerEntry[] = [];
  for (const hash of hashes) {
    if (hash["boot"] === undefined) continue;
    out.push({
      id: hash["id"] ?? "?",
      worker: hash["worker"] ?? "?",
      host: hash["host"] ?? "?",
      pid: Number(hash["pid"]),
      slotsBusy: Number(hash["slotsBusy"]),
      slotsTotal: Number(hash["slotsTotal"]),
      // Entries written before warm sessions have no count.
      warmKept: Number(hash["warmKept"] ?? 0),
      draining: hash["draining"] === "1",
      startedAt: hash["startedAt"] ?? "",
      beatAt: hash["beatAt"] ?? "",
      version: hash["version"] ?? "",
      boot: hash["boot"],
      queue: hash["queue"],
    });
  }
  return out.sort((a, b) => a.id.localeCompare(b.id));
}
