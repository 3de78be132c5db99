// Session snapshots as deltas. The CLI's session file is JSONL that it only appends to, and it is
// large from the first turn on (~140 KB: tool definitions, request shapes), while a turn adds a few
// KB. So when the new file starts with the bytes of the snapshot this run restored, the snapshot
// stores only the appended bytes and the seq of the one it extends; every MAX_SNAPSHOT_DEPTH steps
// (or when the CLI rewrote earlier bytes) it stores the whole file again. `bytes` and `sha256`
// always describe the whole file, and a restore that does not reproduce them is refused.
import { createHash, type Hash } from "node:crypto";
import { latestSnapshotRef, type EventLog, type SnapshotRef } from "../log/index.ts";
import type { SessionSnapshotData } from "../events/index.ts";

/** What a worker keeps of recent session files unless told otherwise (TurnWorkerOptions.snapshotCacheBytes). */
export const DEFAULT_SNAPSHOT_CACHE_BYTES = 64 * 1024 * 1024;

/** Deltas in a row before a snapshot holds the whole file again (bounds the reads of a restore). */
export const MAX_SNAPSHOT_DEPTH = 8;

export interface Snapshot {
  seq: number;
  cliSessionId: string;
  /** The whole session file. */
  bytes: Buffer;
  /** Deltas between this snapshot and the last whole one (0: it is whole). */
  depth: number;
  /** The cwd the CLI ran in (undefined in logs from before it was recorded). */
  cwd?: string | undefined;
  /** The CLI session's running total as of this file (undefined in logs from before it was recorded). */
  costTotalUsd?: number | undefined;
  /**
   * sha256 fed with `bytes` and never finalised (use copies): the next snapshot's hash then costs
   * only its appended bytes, not the whole file again.
   */
  hash?: Hash;
}

/** A snapshot's event data, and the unfinalised sha256 over the whole file (for the next one). */
export function snapshotRecord(
  file: Buffer,
  cliSessionId: string,
  restored: Snapshot | undefined,
): { data: SessionSnapshotData; hash: Hash } {
  const base = restored?.bytes;
  if (
    restored !== undefined &&
    base !== undefined &&
    restored.cliSessionId === cliSessionId &&
    restored.depth < MAX_SNAPSHOT_DEPTH &&
    file.length >= base.length &&
    file.subarray(0, base.length).equals(base)
  ) {
    const delta = file.subarray(base.length);
    const hash = (restored.hash?.copy() ?? createHash("sha256").update(base)).update(delta);
    const data = { cliSessionId, bytes: file.length, sha256: hash.copy().digest("hex") };
    return {
      data: { ...data, base64: delta.toString("base64"), baseSeq: restored.seq, depth: restored.depth + 1 },
      hash,
    };
  }
  const hash = createHash("sha256").update(file);
  return {
    data: { cliSessionId, bytes: file.length, sha256: hash.copy().digest("hex"), base64: file.toString("base64") },
    hash,
  };
}

/** What to record for the session file a run left, given the snapshot it restored (if any). */
export function snapshotData(file: Buffer, cliSessionId: string, restored: Snapshot | undefined): SessionSnapshotData {
  return snapshotRecord(file, cliSessionId, restored).data;
}

/**
 * The session files of the snapshots this worker wrote or restored last, per session, known by the
 * epoch of the attempt that wrote the snapshot (one attempt writes at most one) and the event's
 * time, so a session deleted and started again under the same id cannot match. A turn that finds
 * its session's latest snapshot here skips reading and checking the chain back to a whole file.
 * Least recently used entries go first once the bytes held pass the limit.
 */
export class SnapshotCache {
  readonly #entries = new Map<string, { epoch: number; at: string; snapshot: Snapshot }>();
  readonly #maxBytes: number;
  #bytes = 0;

  constructor(maxBytes = DEFAULT_SNAPSHOT_CACHE_BYTES) {
    this.#maxBytes = maxBytes;
  }

  /** The session's snapshot event written at `epoch` and time `at`, with `seq` as found in the log. */
  get(session: string, epoch: number, at: string, seq: number): Snapshot | undefined {
    const entry = this.#entries.get(session);
    if (entry === undefined || entry.epoch !== epoch || entry.at !== at) return undefined;
    this.#entries.delete(session);
    this.#entries.set(session, entry);
    return { ...entry.snapshot, seq };
  }

  set(session: string, epoch: number, at: string, snapshot: Snapshot): void {
    this.delete(session);
    if (snapshot.bytes.length > this.#maxBytes) return;
    this.#entries.set(session, { epoch, at, snapshot });
    this.#bytes += snapshot.bytes.length;
    for (const [cachedSession, entry] of this.#entries) {
      if (this.#bytes <= this.#maxBytes) break;
      this.#entries.delete(cachedSession);
      this.#bytes -= entry.snapshot.bytes.length;
    }
  }

  delete(session: string): void {
    const entry = this.#entries.get(session);
    if (entry === undefined) return;
    this.#entries.delete(session);
    this.#bytes -= entry.snapshot.bytes.length;
  }

  get bytes(): number {
    return this.#bytes;
  }
}

type Stored = Partial<SessionSnapshotData> & { base64?: unknown; baseSeq?: unknown; depth?: unknown };

async function readSnapshotEvent(log: EventLog, session: string, seq: number): Promise<Stored | undefined> {
  for await (const ev of log.read(session, { fromSeq: seq, toSeq: seq })) {
    if (ev.kind !== "session.snapshot" || ev.data === null || typeof ev.data !== "object") return undefined;
    return ev.data as Stored;
  }
  return undefined;
}

/**
 * The whole session file of the snapshot at `seq`, following its chain back to a whole one.
 * Undefined when a link is missing or malformed, or the result does not match the recorded length
 * and sha256: a wrong session file must never be restored.
 */
export async function assembleSnapshot(log: EventLog, session: string, seq: number): Promise<Snapshot | undefined> {
  const top = await readSnapshotEvent(log, session, seq);
  if (typeof top?.cliSessionId !== "string" || typeof top.base64 !== "string") return undefined;
  const parts: Buffer[] = [Buffer.from(top.base64, "base64")];
  let link: Stored = top;
  for (let hops = 0; typeof link.baseSeq === "number"; hops++) {
    if (hops >= MAX_SNAPSHOT_DEPTH || link.baseSeq >= seq) return undefined;
    const next = await readSnapshotEvent(log, session, link.baseSeq);
    if (next?.cliSessionId !== top.cliSessionId || typeof next.base64 !== "string") return undefined;
    parts.push(Buffer.from(next.base64, "base64"));
    link = next;
  }
  const bytes = parts.length === 1 ? parts[0]! : Buffer.concat(parts.reverse());
  const hash = createHash("sha256").update(bytes);
  if (bytes.length !== top.bytes || hash.copy().digest("hex") !== top.sha256) return undefined;
  const depth = typeof top.depth === "number" ? top.depth : 0;
  const cwd = typeof top.cwd === "string" ? top.cwd : undefined;
  const costTotalUsd = typeof top.costTotalUsd === "number" && top.costTotalUsd >= 0 ? top.costTotalUsd : undefined;
  return { seq, cliSessionId: top.cliSessionId, bytes, depth, hash, cwd, costTotalUsd };
}

/**
 * The session's latest `session.snapshot` as the whole session file, or undefined when it has none
 * (or it cannot be rebuilt). Taken from `cache` when it holds the one the same attempt wrote. `known`
 * is where beginAttempt found it (null: there is none); without it the log is asked where it is.
 */
export async function latestSnapshot(
  log: EventLog,
  session: string,
  cache?: SnapshotCache,
  known?: SnapshotRef | null,
): Promise<Snapshot | undefined> {
  if (known === null) return undefined;
  const ref = known ?? (await latestSnapshotRef(log, session));
  return ref === undefined ? undefined : snapshotAt(log, session, ref, cache);
}

async function snapshotAt(
  log: EventLog,
  session: string,
  ref: SnapshotRef,
  cache: SnapshotCache | undefined,
): Promise<Snapshot | undefined> {
  const cached = ref.epoch > 0 ? cache?.get(session, ref.epoch, ref.at, ref.seq) : undefined;
  if (cached !== undefined) return cached;
  const snapshot = await assembleSnapshot(log, session, ref.seq);
  if (snapshot !== undefined && ref.epoch > 0) cache?.set(session, ref.epoch, ref.at, snapshot);
  return snapshot;
}

const COST_STATE = Buffer.from('"type":"cost-state"');

/**
 * The running total a CLI started with `--resume` on this session file goes on from: the CLI writes
 * its session's cost (a `cost-state` line) into the file when its process exits, and restores the
 * last one on resume (measured with CLI 2.1.332). A file saved while its process lived on (a warm
 * turn) has none for its latest turns, and the CLI then counts from the last one it has, or from 0.
 */
export function restoredCostTotal(file: Buffer, cliSessionId: string): number {
  for (let at = file.lastIndexOf(COST_STATE); at >= 0; at = at === 0 ? -1 : file.lastIndexOf(COST_STATE, at - 1)) {
    const start = file.lastIndexOf(0x0a, at) + 1;
    const nl = file.indexOf(0x0a, at);
    let rec: unknown;
    try {
      rec = JSON.parse(file.subarray(start, nl < 0 ? file.length : nl).toString("utf8"));
    } catch {
      continue; // a broken line says nothing
    }
    const record = rec as { type?: unknown; sessionId?: unknown; totalCostUSD?: unknown };
    if (record.type !== "cost-state" || record.sessionId !== cliSessionId) continue;
    return typeof record.totalCostUSD === "number" && record.totalCostUSD >= 0 ? record.totalCostUSD : 0;
  }
  return 0;
}
