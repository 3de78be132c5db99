// JSONL export/import of a session's log. Export writes one envelope per line (blobs resolved).
// Import takes either such a file (same seq numbers, same epochs) or a raw CLI stdout recording
// (each line becomes a cli.line event of one new attempt), always into an empty session. Every import
// first sets the session's meta field `imported`: whatever reads the log later to run something (a
// re-run) knows it holds what someone's file said, not what a worker recorded, even when the import
// stopped half-way. The events themselves stay exactly as exported.
import { createReadStream } from "node:fs";
import type { Writable } from "node:stream";
import { once } from "node:events";
import { envelopeSchema, type Envelope, type EventInput } from "./envelope.ts";
import { ConflictError, FencedError, LogRolledBackError } from "./errors.ts";
import { newWriterId, type EncodedEvent, type EventLog } from "./event-log.ts";

/**
 * Writes a session's log to `out` as JSON lines (one envelope each, blobs inlined); resolves with the number of events.
 */
export async function exportJsonl(log: Pick<EventLog, "read">, session: string, out: Writable): Promise<number> {
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
    const parsed = envelopeSchema.safeParse(JSON.parse(line));
    return parsed.success ? parsed.data : undefined;
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

/** The session meta field an import sets (to when it began): the session holds imported events. */
export const IMPORTED_FIELD = "imported";

/** When the session was loaded by an import, or undefined when a worker wrote everything in its log. */
export async function importedAt(log: EventLog, session: string): Promise<string | undefined> {
  return (await log.redis.hget(log.keys(session).meta, IMPORTED_FIELD)) ?? undefined;
}

/** Appends imported events in batches, each checked against the seq the previous one left. */
class ImportBatches {
  lastSeq = 0;
  count = 0;
  /** Raise the session's epoch to at least this (the highest imported epoch), so a new attempt fences them all. */
  epochFloor: number | undefined;
  readonly #log: EventLog;
  readonly #session: string;
  readonly #epoch: number | null;
  readonly #maxEvents: number;
  readonly #maxBytes: number;
  readonly #writer = newWriterId();
  #batchNo = 0;
  #events: EncodedEvent[] = [];
  #bytes = 0;

  constructor(log: EventLog, session: string, epoch: number | null, options: ImportOptions) {
    this.#log = log;
    this.#session = session;
    this.#epoch = epoch;
    this.#maxEvents = options.batchEvents ?? 500;
    this.#maxBytes = options.batchBytes ?? 4 * 1024 * 1024;
  }

  /** The seq the next event added will get. */
  get nextSeq(): number {
    return this.lastSeq + this.#events.length + 1;
  }

  async add(event: EncodedEvent): Promise<void> {
    this.#events.push(event);
    this.#bytes += event.bytes;
    if (this.#events.length >= this.#maxEvents || this.#bytes >= this.#maxBytes) await this.#flush();
  }

  /** Appends what is left and drops the import's dedupe entry. */
  async finish(): Promise<{ count: number; lastSeq: number }> {
    await this.#flush();
    if (this.#batchNo > 0) await this.#log.forgetWriter(this.#session, this.#writer);
    return { count: this.count, lastSeq: this.lastSeq };
  }

  async #flush(): Promise<void> {
    if (this.#events.length === 0) return;
    this.#batchNo++;
    const res = await this.#log.appendEncoded(this.#session, this.#epoch, this.#events, {
      expectedSeq: this.lastSeq,
      batchId: `${this.#writer}:${this.#batchNo}`,
      epochFloor: this.epochFloor,
    });
    if (res.outcome === "rolled_back") throw new LogRolledBackError(this.#session, this.lastSeq, res.lastSeq);
    if (res.outcome === "fenced") throw new FencedError(this.#session, this.#epoch ?? 0, res.epoch);
    if (res.outcome === "conflict") throw new ConflictError(this.#session, this.lastSeq, res.lastSeq);
    this.lastSeq = res.lastSeq;
    this.count += this.#events.length;
    this.#events = [];
    this.#bytes = 0;
  }
}

/** The first line that is not empty (the lines before it are dropped), or undefined at the end. */
async function firstNonEmpty(lines: AsyncGenerator<string>): Promise<string | undefined> {
  for (;;) {
    const next = await lines.next();
    if (next.done === true) return undefined;
    if (next.value.length > 0) return next.value;
  }
}

async function* prepend(first: string, rest: AsyncGenerator<string>): AsyncGenerator<string> {
  yield first;
  yield* rest;
}

function eventInputOf(env: Envelope): EventInput {
  const input: EventInput = { turn: env.turn, attempt: env.attempt, kind: env.kind, data: env.data, at: env.at };
  if (env.cli) input.cli = env.cli;
  return input;
}

/** The envelopes of an export's lines; a line that is not one stops the import (the file mixes formats). */
async function* envelopesOfLines(path: string, lines: AsyncIterable<string>): AsyncGenerator<Envelope> {
  let lineNo = 0;
  for await (const line of lines) {
    if (line.length === 0) continue;
    lineNo++;
    const env = asEnvelope(line);
    if (env === undefined) throw new Error(`${path}: line ${lineNo} is not an envelope; the file mixes formats`);
    yield env;
  }
}

export interface EnvelopeImportOptions extends ImportOptions {
  /** Where the envelopes come from, for messages (a file path, an archive). */
  source: string;
}

/**
 * Appends exported envelopes to an empty session, each keeping its seq (so they must hold every seq
 * from 1 on) and its epoch; the session's epoch is raised to the highest, so a new attempt fences them
 * all. It marks nothing: an import from a file marks the session `imported` first, a restore from
 * the archive brings back the meta fields the session had.
 */
export async function importEnvelopes(
  log: EventLog,
  session: string,
  envelopes: AsyncIterable<Envelope> | Iterable<Envelope>,
  options: EnvelopeImportOptions,
): Promise<ImportResult> {
  const batches = new ImportBatches(log, session, null, options);
  batches.epochFloor = 0;
  for await (const env of envelopes) {
    const expected = batches.nextSeq;
    if (env.seq !== expected)
      throw new Error(
        `${options.source}: expected seq ${expected} but found ${env.seq}; an exported log has every seq from 1 on`,
      );
    batches.epochFloor = Math.max(batches.epochFloor, env.epoch);
    await batches.add(log.encode(session, env.epoch, eventInputOf(env)));
  }
  const { count, lastSeq } = await batches.finish();
  return { mode: "envelopes", count, lastSeq };
}

/** A raw CLI stdout recording: one attempt of a new turn, one cli.line per line. */
async function importRaw(
  log: EventLog,
  session: string,
  lines: AsyncGenerator<string>,
  options: ImportOptions,
): Promise<ImportResult> {
  const turn = options.turn ?? `import-${Date.now()}`;
  const { epoch, attempt } = await log.beginAttempt(session, turn);
  const batches = new ImportBatches(log, session, epoch, options);
  for await (const line of lines)
    await batches.add(log.encode(session, epoch, { turn, attempt, kind: "cli.line", data: { raw: line } }));
  const { count, lastSeq } = await batches.finish();
  return { mode: "raw", count, lastSeq };
}

/**
 * Loads a JSONL export back into a session with the same seqs, or a raw CLI stdout recording as one `cli.line` per
 * line.
 */
export async function importFile(
  log: EventLog,
  session: string,
  path: string,
  options: ImportOptions = {},
): Promise<ImportResult> {
  const st = await log.stat(session);
  if (st.lastSeq > 0) {
    throw new Error(`session ${session} already has ${st.lastSeq} events; import into a new session id`);
  }
  const lines = fileLines(path);
  const first = await firstNonEmpty(lines);
  if (first === undefined) return { mode: "raw", count: 0, lastSeq: 0 };
  const all = prepend(first, lines);
  // Marked before the first event goes in: a file that fails half-way still leaves a marked session.
  await log.redis.hset(log.keys(session).meta, IMPORTED_FIELD, new Date().toISOString());
  return asEnvelope(first) !== undefined
    ? importEnvelopes(log, session, envelopesOfLines(path, all), { ...options, source: path })
    : importRaw(log, session, all, options);
}
