// One session's live projection: load the stored state and checkpoint, read the events after it,
// fold them, commit state and checkpoint in one compare-and-set script. Crash anywhere and the next
// load continues from the last commit; a re-delivered event is at or below the checkpoint and is
// ignored; two projectors racing lose nothing and apply nothing twice, because the loser's commit is
// refused (`conflict`) and it reloads.
import type { Envelope, EventLog, RedisClient } from "../log/index.ts";
import { applyEvent } from "./reduce.ts";
import { initialState, type ProjectionState } from "./state.ts";
import {
  commitProjection,
  decodeState,
  projectionKeys,
  readPointer,
  type CommitReply,
  type ProjectionKeys,
} from "./store.ts";

/** Events per XRANGE page while folding. */
const READ_PAGE = 2000;

export type StepResult = "idle" | "progress" | "conflict" | "superseded";

export interface SessionProjectionOptions {
  log: EventLog;
  session: string;
  version: number;
  /** Most events folded per commit; default 5000. */
  batchEvents?: number;
  /** A step that has folded for this long commits what it has (checked every 1000 events); default 2000 ms. */
  maxBatchMs?: number;
  /** Test hook: called before the commit is sent and after its reply arrived; a throw simulates a crash there. */
  faults?: { beforeCommit?(session: string): void; afterCommit?(session: string, reply: CommitReply): void };
}

export class SessionProjection {
  readonly session: string;
  readonly version: number;
  readonly keys: ProjectionKeys;
  readonly #log: EventLog;
  readonly #redis: RedisClient;
  readonly #batch: number;
  readonly #maxBatchMs: number;
  readonly #faults: SessionProjectionOptions["faults"];
  #state: ProjectionState | undefined;
  /** The seq the in-memory state was committed (or loaded) at. */
  #committed = 0;
  #pointer: number | null = null;
  #superseded = false;
  #dirty = new Set<number>();

  constructor(options: SessionProjectionOptions) {
    this.session = options.session;
    this.version = options.version;
    this.#log = options.log;
    this.#redis = options.log.redis;
    this.#batch = options.batchEvents ?? 5000;
    this.#maxBatchMs = options.maxBatchMs ?? 2000;
    this.#faults = options.faults;
    this.keys = projectionKeys(options.log.prefix, options.session, options.version);
  }

  get checkpoint(): number {
    return this.#committed;
  }
  get superseded(): boolean {
    return this.#superseded;
  }
  get state(): ProjectionState | undefined {
    return this.#state;
  }

  /** (Re)loads the stored state and checkpoint; discards anything folded but not committed. */
  async load(): Promise<void> {
    const [hash, pointer] = await Promise.all([
      this.#redis.hgetall(this.keys.model),
      readPointer(this.#redis, this.keys),
    ]);
    this.#pointer = pointer;
    if (pointer !== null && pointer > this.version) this.#superseded = true;
    this.#state = decodeState(hash) ?? initialState();
    this.#committed = this.#state.lastSeq;
    this.#dirty.clear();
  }

  /** Folds events into the in-memory state (events at or below its seq are ignored). */
  apply(
    events: readonly Pick<Envelope, "seq" | "session" | "turn" | "attempt" | "epoch" | "at" | "kind" | "data">[],
  ): void {
    const state = this.#state;
    if (state === undefined) throw new Error("load() the projection before applying events");
    for (const event of events) {
      if (event.seq <= state.lastSeq) continue;
      applyEvent(state, event);
      const ti = state.cursor.turnIndex[event.turn];
      if (ti !== undefined) this.#dirty.add(ti);
    }
  }

  /** Commits the in-memory state if it moved past the checkpoint. */
  async commit(): Promise<CommitReply["outcome"] | "unchanged"> {
    const state = this.#state;
    if (state === undefined) throw new Error("load() the projection before committing");
    if (state.lastSeq === this.#committed) return "unchanged";
    for (let tries = 0; ; tries++) {
      this.#faults?.beforeCommit?.(this.session);
      // A first commit writes every turn; later ones only those the batch touched.
      const turns = this.#committed === 0 ? undefined : this.#dirty;
      const reply = await commitProjection(
        this.#redis,
        this.keys,
        this.version,
        this.#committed,
        this.#pointer,
        state,
        turns,
      );
      this.#faults?.afterCommit?.(this.session, reply);
      if (reply.outcome === "repoint" && tries < 3) {
        this.#pointer = reply.n === 0 ? null : reply.n;
        continue;
      }
      if (reply.outcome === "committed") {
        this.#committed = state.lastSeq;
        this.#dirty.clear();
        if (reply.n === 1) this.#pointer = this.version;
      } else if (reply.outcome === "superseded") {
        this.#superseded = true;
      }
      return reply.outcome;
    }
  }

  /**
   * One step: fold up to `batchEvents` events after the checkpoint and commit them. `idle` when the
   * log had nothing new; `conflict` when another projector got there first (state reloaded).
   */
  async step(): Promise<StepResult> {
    if (this.#state === undefined) await this.load();
    if (this.#superseded) return "superseded";
    const state = this.#state!;
    const from = state.lastSeq + 1;
    const started = Date.now();
    let applied = 0;
    // Folded page by page as they stream in (the log fetches the next page meanwhile; no batch is
    // held in memory); committed after batchEvents or maxBatchMs.
    const pages = this.#log.readPages(this.session, {
      fromSeq: from,
      toSeq: from + this.#batch - 1,
      pageSize: READ_PAGE,
    });
    for await (const page of pages) {
      let lastTurn: string | undefined;
      for (const event of page) {
        if (event.seq <= state.lastSeq) continue;
        applyEvent(state, event);
        applied++;
        if (event.turn === lastTurn) continue;
        const ti = state.cursor.turnIndex[event.turn];
        if (ti === undefined) continue;
        this.#dirty.add(ti);
        lastTurn = event.turn;
      }
      if (Date.now() - started > this.#maxBatchMs) break;
    }
    if (applied === 0) return (await this.#storeWentBack()) ? "conflict" : "idle";
    const outcome = await this.commit();
    if (outcome === "conflict" || outcome === "repoint") {
      await this.load();
      return "conflict";
    }
    if (outcome === "superseded") return "superseded";
    return "progress";
  }

  /**
   * The stored checkpoint is below the one this projection committed: commits only move it forward,
   * so Redis lost writes (a failover to a replica that missed them), the log's events with them.
   * The state is reloaded from what the store still holds, so events written again under the lost
   * seqs are folded instead of passed over as already seen.
   */
  async #storeWentBack(): Promise<boolean> {
    if (this.#committed === 0) return false;
    const stored = Number((await this.#redis.hget(this.keys.model, "seq")) ?? 0);
    if (stored >= this.#committed) return false;
    await this.load();
    return true;
  }

  /** Steps until the log has nothing new (or the projection is superseded). */
  async catchUp(): Promise<StepResult> {
    for (;;) {
      const stepped = await this.step();
      if (stepped === "idle" || stepped === "superseded") return stepped;
    }
  }
}
