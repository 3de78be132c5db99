// JSONL export/import of a session's log. Export writes one envelope per line (blobs resolved).
// Import takes either such a file (same seq numbers, same epochs) or a raw CLI stdout recording
// (each line becomes a cli.line event of one new attempt), always into an empty session.
import { createReadStream } from "node:fs";
import type { Writable } from "node:stream";
import { once } from "node:events";
import { envelopeSchema, type Envelope } from "./envelope.ts";
import { ConflictError, FencedError } from "./errors.ts";
import { newWriterId, type EncodedEvent, type EventLog } from "./event-log.ts";

/** Writes a session's log to `out` as JSON lines (one envelope each, blobs inlined); resolves with the number of events. */
export async function exportJsonl(log: EventLog, session: string, out: Writable): Promise<number> {
  let count = 0;
  for await (const ev of log.read(session)) {
    if (!out.write(JSON.stringify(ev) + "\n")) await once(out, "drain");
    count++;
  }
  return count;
}

/** Lines split on "\n" only (a "\r" stays part of the line: raw text must survive exactly). */
async function* fileLines(path: string): AsyncGenerator<string> {
  let parts: Buffer[] = [];
  for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      if (nl === -1) break;
      parts.push(chunk.subarray(start, nl));
      yield (parts.length === 1 ? parts[0]! : Buffer.concat(parts)).toString("utf8");
      parts = [];
      start = nl + 1;
    }
    if (start < chunk.length) parts.push(chunk.subarray(start));
  }
  if (parts.length > 0) yield Buffer.concat(parts).toString("utf8");
}

function asEnvelope(line: string): Envelope | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const r = envelopeSchema.safeParse(JSON.parse(line));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

export interface ImportResult {
  mode: "envelopes" | "raw";
  count: number;
  lastSeq: number;
}

export interface ImportOptions {
  /** Turn id for a raw CLI recording; default `import-<time>`. */
  turn?: string;
  batchEvents?: number;
  batchBytes?: number;
}

/** Loads a JSONL export back into a session with the same seqs, or a raw CLI stdout recording as one `cli.line` per line. */
export async function importFile(log: EventLog, session: string, path: string, options: ImportOptions = {}): Promise<ImportResult> {
  const st = await log.stat(session);
  if (st.lastSeq > 0) {
    throw new Error(`session ${session} already has ${st.lastSeq} events; import into a new session id`);
  }
  const batchEvents = options.batchEvents ?? 500;
  const batchBytes = options.batchBytes ?? 4 * 1024 * 1024;
  const writer = newWriterId();
  let n = 0;
  let lastSeq = 0;
  let count = 0;
  let mode: ImportResult["mode"] | undefined;
  let epoch: number | null = null;
  let attempt = 0;
  let turn = "";
  let batch: EncodedEvent[] = [];
  let bytes = 0;
  let maxEpoch = 0;

  const flush = async (): Promise<void> => {
    if (batch.length === 0) return;
    n++;
    const res = await log.appendEncoded(session, epoch, batch, {
      expectedSeq: lastSeq,
      batchId: `${writer}:${n}`,
      ...(mode === "envelopes" ? { epochFloor: maxEpoch } : {}),
    });
    if (res.outcome === "fenced") throw new FencedError(session, epoch ?? 0, res.epoch);
    if (res.outcome === "conflict") throw new ConflictError(session, lastSeq, res.lastSeq);
    lastSeq = res.lastSeq;
    count += batch.length;
    batch = [];
    bytes = 0;
  };

  for await (const line of fileLines(path)) {
    if (mode === undefined) {
      if (line.length === 0) continue;
      if (asEnvelope(line) !== undefined) {
        mode = "envelopes";
      } else {
        mode = "raw";
        turn = options.turn ?? `import-${Date.now()}`;
        ({ epoch, attempt } = await log.beginAttempt(session, turn));
      }
    }
    let enc: EncodedEvent;
    if (mode === "envelopes") {
      if (line.length === 0) continue;
      const env = asEnvelope(line);
      if (env === undefined) throw new Error(`${path}: line ${lastSeq + batch.length + 1} is not an envelope; the file mixes formats`);
      const expected = lastSeq + batch.length + 1;
      if (env.seq !== expected) {
        throw new Error(`${path}: expected seq ${expected} but found ${env.seq}; an exported log has every seq from 1 on`);
      }
      maxEpoch = Math.max(maxEpoch, env.epoch);
      const input = { turn: env.turn, attempt: env.attempt, kind: env.kind, data: env.data, at: env.at, ...(env.cli ? { cli: env.cli } : {}) };
      enc = log.encode(session, env.epoch, input);
    } else {
      enc = log.encode(session, epoch!, { turn, attempt, kind: "cli.line", data: { raw: line } });
    }
    batch.push(enc);
    bytes += enc.bytes;
    if (batch.length >= batchEvents || bytes >= batchBytes) await flush();
  }
  await flush();
  if (n > 0) await log.forgetWriter(session, writer);
  return { mode: mode ?? "raw", count, lastSeq };
}
