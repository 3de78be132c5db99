// Session snapshots as deltas. The CLI's session file is JSONL that it only appends to, and it is
// large from the first turn on (~140 KB: tool definitions, request shapes), while a turn adds a few
// KB. So when the new file starts with the bytes of the snapshot this run restored, the snapshot
// stores only the appended bytes and the seq of the one it extends; every MAX_SNAPSHOT_DEPTH steps
// (or when the CLI rewrote earlier bytes) it stores the whole file again. `bytes` and `sha256`
// always describe the whole file, and a restore that does not reproduce them is refused.
import { createHash } from "node:crypto";
import type { EventLog } from "../log/index.ts";
import type { SessionSnapshotData } from "../queue/index.ts";

/** Deltas in a row before a snapshot holds the whole file again (bounds the reads of a restore). */
export const MAX_SNAPSHOT_DEPTH = 8;

export interface Snapshot {
  seq: number;
  cliSessionId: string;
  /** The whole session file. */
  bytes: Buffer;
  /** Deltas between this snapshot and the last whole one (0: it is whole). */
  depth: number;
}

const sha256 = (b: Buffer): string => createHash("sha256").update(b).digest("hex");

/** What to record for the session file a run left, given the snapshot it restored (if any). */
export function snapshotData(file: Buffer, cliSessionId: string, restored: Snapshot | undefined): SessionSnapshotData {
  const whole = { cliSessionId, bytes: file.length, sha256: sha256(file) };
  const base = restored?.bytes;
  if (
    restored !== undefined &&
    base !== undefined &&
    restored.cliSessionId === cliSessionId &&
    restored.depth < MAX_SNAPSHOT_DEPTH &&
    file.length >= base.length &&
    file.subarray(0, base.length).equals(base)
  ) {
    return { ...whole, base64: file.subarray(base.length).toString("base64"), baseSeq: restored.seq, depth: restored.depth + 1 };
  }
  return { ...whole, base64: file.toString("base64") };
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
  const bytes = Buffer.concat(parts.reverse());
  if (bytes.length !== top.bytes || sha256(bytes) !== top.sha256) return undefined;
  return { seq, cliSessionId: top.cliSessionId, bytes, depth: typeof top.depth === "number" ? top.depth : 0 };
}
