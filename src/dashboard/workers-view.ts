// The workers as their heartbeats say (src/worker/registry.ts: host, pid, slots busy of total, warm
// processes kept, version, last beat), each with the turns it runs now, and the running turns whose
// worker no longer beats: their job is still active in BullMQ, but the worker its attempt names is
// gone (a crash or a partition), so the turn waits for BullMQ's stalled check to hand it on.
import type { Queue } from "bullmq";
import { LRUCache } from "lru-cache";
import { forTerminal } from "../kernel/index.ts";
import { storedEnvelope, storedHead, type EventLog } from "../log/index.ts";
import { jobRow } from "../queue/index.ts";
import { readWorkers } from "../worker/index.ts";

export interface RunningTurn {
  session: string;
  turn: string;
  attempt: number;
  /** The worker id its attempt.started names; null before the attempt has started. */
  worker: string | null;
  startedAt: string | null;
}

export interface WorkerRow {
  id: string;
  worker: string;
  host: string;
  pid: number;
  slotsBusy: number;
  slotsTotal: number;
  warmKept: number;
  version: string;
  startedAt: string;
  beatAt: string;
  heartbeatAgeMs: number;
  runs: RunningTurn[];
}

export interface WorkersView {
  workers: WorkerRow[];
  /** Active turns whose attempt names a worker that no longer beats. */
  orphaned: RunningTurn[];
  /** Active turns whose attempt has not started yet (taken from the queue a moment ago). */
  starting: RunningTurn[];
  /** Whether the queue could be read (no queue configured: only the registry). */
  queue: boolean;
}

/** Most active jobs read: a fleet runs at most its slots' total at once. */
const MAX_ACTIVE = 1000;
/** Events read back from a log's end looking for an attempt's start: beyond it the worker is not named. */
const MAX_SCAN = 5000;
const SCAN_PAGE = 250;

export class WorkersReader {
  readonly #log: EventLog;
  readonly #queue: Queue | undefined;
  /** `<session>\0<turn>\0<attempt>` → the worker its attempt.started names (never changes). */
  readonly #attemptWorkers = new LRUCache<string, string>({ max: 10_000 });

  constructor(log: EventLog, queue: Queue | undefined) {
    this.#log = log;
    this.#queue = queue;
  }

  async view(nowMs = Date.now()): Promise<WorkersView> {
    const [entries, running] = await Promise.all([readWorkers(this.#log.redis, this.#log.prefix), this.#running()]);
    const line = (text: string): string => forTerminal(text);
    const live = new Set(entries.map((entry) => entry.worker));
    const workers = entries.map(({ boot: _boot, ...entry }): WorkerRow => ({
      ...entry,
      id: line(entry.id),
      worker: line(entry.worker),
      host: line(entry.host),
      version: line(entry.version),
      heartbeatAgeMs: Math.max(0, nowMs - Date.parse(entry.beatAt)),
      runs: running.filter((run) => run.worker === entry.worker).map(shownRun),
    }));
    return {
      workers,
      orphaned: running.filter((run) => run.worker !== null && !live.has(run.worker)).map(shownRun),
      starting: running.filter((run) => run.worker === null).map(shownRun),
      queue: this.#queue !== undefined,
    };
  }

  /** The queue's active turns, each with the worker that runs its current attempt. */
  async #running(): Promise<RunningTurn[]> {
    if (this.#queue === undefined) return [];
    const jobs = await this.#queue.getActive(0, MAX_ACTIVE - 1);
    return Promise.all(
      jobs
        .filter((job) => job !== undefined && job !== null)
        .map(async (job) => {
          const row = jobRow(job, "active");
          const st = await this.#log.stat(row.session).catch(() => undefined);
          // The log's meta names the attempt under way; the job's count of tries need not match it.
          const current = st !== undefined && st.turn === row.turn && st.attempt > 0 ? st.attempt : null;
          const worker = current === null ? null : await this.#workerOf(row.session, row.turn, current);
          return {
            session: row.session,
            turn: row.turn,
            attempt: current ?? row.attempt,
            worker: worker ?? null,
            startedAt: row.startedAt ?? null,
          };
        }),
    );
  }

  /** The worker the attempt's attempt.started names, read back from the log's end. */
  async #workerOf(session: string, turn: string, attempt: number): Promise<string | undefined> {
    const key = `${session}\u0000${turn}\u0000${attempt}`;
    const known = this.#attemptWorkers.get(key);
    if (known !== undefined) return known;
    const stream = this.#log.keys(session).events;
    let end = "+";
    for (let scanned = 0; scanned < MAX_SCAN; scanned += SCAN_PAGE) {
      const page = (await this.#log.redis.xrevrange(stream, end, "-", "COUNT", SCAN_PAGE)) as Array<[string, string[]]>;
      for (const [, fields] of page) {
        const text = storedEnvelope(fields);
        const head = storedHead(text);
        if (head?.kind !== "attempt.started" || head.turn !== turn || head.attempt !== attempt) continue;
        const worker = (JSON.parse(text!) as { data?: { worker?: unknown } }).data?.worker;
        if (typeof worker !== "string") return undefined;
        this.#attemptWorkers.set(key, worker);
        return worker;
      }
      if (page.length < SCAN_PAGE) return undefined;
      end = `(${page.at(-1)![0]}`;
    }
    return undefined;
  }
}

function shownRun(run: RunningTurn): RunningTurn {
  return {
    ...run,
    session: forTerminal(run.session),
    turn: forTerminal(run.turn),
    worker: run.worker === null ? null : forTerminal(run.worker),
  };
}
