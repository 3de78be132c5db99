// Reads the worker needs from a session's log: the latest session snapshot, attempts of a turn that
// started but never ended (their worker died), and the transcript for a replay. Backward scans read
// the stream's stored envelope (`e`, see src/log/README.md) for kind/turn/attempt only, and decode
// the one event they need through the log's own reader.
import { isKnown, parseLine, renderText } from "../protocol/index.ts";
import { numberField, stringField } from "../kernel/index.ts";
import { dataOf, isTerminalKind } from "../events/index.ts";
import { storedEnvelope, storedHead, type Envelope, type EventLog, type SnapshotRef } from "../log/index.ts";
import { assembleSnapshot, type Snapshot, type SnapshotCache } from "./snapshots.ts";

interface Head {
  seq: number;
  kind: string;
  turn: string;
  attempt: number;
  epoch: number;
  at: string;
  dataAttempt: number | undefined;
}

// Most scans end a few entries back (the previous turn's snapshot sits right before its
// turn.finished): the first page is small, later ones grow, so a short scan does not fetch (and
// decode) hundreds of entries with their data.
const FIRST_PAGE = 4;
const MAX_PAGE = 256;
function headOf(seq: number, env: string | undefined): Head | undefined {
  const h = storedHead(env);
  // Only an abandonment's own data is needed (which attempt it abandons): parse just those.
  if (h !== undefined && h.kind !== "attempt.abandoned") return { seq, ...h, dataAttempt: undefined };
  try {
    const rec = JSON.parse(env ?? "{}") as {
      kind?: string;
      turn?: string;
      attempt?: number;
      epoch?: number;
      at?: string;
      data?: unknown;
    };
    return {
      seq,
      kind: String(rec.kind),
      turn: String(rec.turn),
      attempt: Number(rec.attempt ?? 0),
      epoch: Number(rec.epoch ?? 0),
      at: String(rec.at),
      dataAttempt: rec.kind === "attempt.abandoned" ? dataOf("attempt.abandoned", rec.data)?.attempt : undefined,
    };
  } catch {
    return undefined; // an unreadable entry says nothing about attempts
  }
}

async function* backwards(log: EventLog, session: string, limit = 200_000, atOrBefore?: number): AsyncGenerator<Head> {
  const key = log.keys(session).events;
  let end = atOrBefore === undefined ? "+" : `0-${atOrBefore}`;
  let seen = 0;
  for (let size = FIRST_PAGE; ; size = Math.min(MAX_PAGE, size * 4)) {
    const page = (await log.redis.xrevrange(key, end, "-", "COUNT", size)) as [string, string[]][];
    for (const [id, fields] of page) {
      const seq = Number(id.slice(id.indexOf("-") + 1));
      const h = headOf(seq, storedEnvelope(fields));
      if (h !== undefined) yield h;
      if (++seen >= limit) return;
      if (seq <= 1) return;
    }
    if (page.length < size) return;
    const last = page[page.length - 1]![0];
    end = `0-${Number(last.slice(last.indexOf("-") + 1)) - 1}`;
  }
}

/**
 * The session's latest `session.snapshot` as the whole session file, or undefined when it has none
 * (or it cannot be rebuilt). Taken from `cache` when it holds the one the same attempt wrote. `known`
 * is where beginAttempt found it (null: there is none); without it the stream is scanned backwards.
 */
export async function latestSnapshot(
  log: EventLog,
  session: string,
  cache?: SnapshotCache,
  known?: SnapshotRef | null,
): Promise<Snapshot | undefined> {
  if (known === null) return undefined;
  if (known !== undefined) return snapshotAt(log, session, known, cache);
  for await (const h of backwards(log, session)) {
    if (h.kind === "session.snapshot") return snapshotAt(log, session, h, cache);
  }
  return undefined;
}

async function snapshotAt(
  log: EventLog,
  session: string,
  h: SnapshotRef,
  cache: SnapshotCache | undefined,
): Promise<Snapshot | undefined> {
  const cached = h.epoch > 0 ? cache?.get(session, h.epoch, h.at, h.seq) : undefined;
  if (cached !== undefined) return cached;
  const snap = await assembleSnapshot(log, session, h.seq);
  if (snap !== undefined && h.epoch > 0) cache?.set(session, h.epoch, h.at, snap);
  return snap;
}

/** The CLI session id the session's turns last reported (turn.finished), for a resume without snapshot. */
export async function lastCliSessionId(log: EventLog, session: string): Promise<string | undefined> {
  for await (const h of backwards(log, session, 20_000)) {
    if (h.kind !== "turn.finished" && h.kind !== "session.replayed") continue;
    for await (const ev of log.read(session, { fromSeq: h.seq, toSeq: h.seq })) {
      const d = ev.kind === "turn.finished" ? dataOf("turn.finished", ev.data) : dataOf("session.replayed", ev.data);
      if (d?.cliSessionId !== undefined) return d.cliSessionId;
    }
  }
  return undefined;
}

/**
 * The cwd of the attempt that wrote the event at `seq` (its attempt.started, else its turn's
 * turn.queued): for a snapshot from before snapshots recorded their cwd. Undefined when neither is found.
 */
export async function writerCwd(log: EventLog, session: string, seq: number): Promise<string | undefined> {
  let writer: { turn: string; attempt: number } | undefined;
  for await (const h of backwards(log, session, 20_000, seq)) {
    writer ??= { turn: h.turn, attempt: h.attempt };
    if (h.turn !== writer.turn) continue; // unfenced events of other turns may sit in between
    if (h.kind === "attempt.started" && h.attempt === writer.attempt)
      return (await eventAt(log, session, h.seq, "attempt.started"))?.cwd;
    if (h.kind === "turn.queued") return (await eventAt(log, session, h.seq, "turn.queued"))?.cwd;
  }
  return undefined;
}

async function eventAt<K extends "attempt.started" | "turn.queued">(
  log: EventLog,
  session: string,
  seq: number,
  kind: K,
) {
  for await (const ev of log.read(session, { fromSeq: seq, toSeq: seq }))
    return ev.kind === kind ? dataOf(kind, ev.data) : undefined;
  return undefined;
}

// A run's last result line sits a few events before its snapshot (then cli.exit; stderr may come between).
const RESULT_LOOKBACK = 16;

/**
 * The running total (`total_cost_usd`) CLI session `cliSessionId` reported last before the event at
 * `seq`: for a snapshot from before snapshots recorded it. Undefined when no such result is near.
 */
export async function reportedTotalBefore(
  log: EventLog,
  session: string,
  seq: number,
  cliSessionId: string,
): Promise<number | undefined> {
  let total: number | undefined;
  for await (const ev of log.read(session, { fromSeq: Math.max(1, seq - RESULT_LOOKBACK), toSeq: seq })) {
    const raw = ev.kind === "cli.line" ? dataOf("cli.line", ev.data)?.raw : undefined;
    const line = raw === undefined ? undefined : parseLine(raw);
    if (line === undefined || !isKnown(line, "result") || stringField(line.line, "session_id") !== cliSessionId)
      continue;
    total = numberField(line.line, "total_cost_usd") ?? total;
  }
  return total;
}

/**
 * Attempts of `turn` below `current` with no end event: their worker died, before or after their
 * attempt.started reached the log (it waits for the CLI's first line). Every number below `current`
 * was begun, since beginAttempt counts a turn's attempts.
 */
export async function danglingAttempts(
  log: EventLog,
  session: string,
  turn: string,
  current: number,
): Promise<number[]> {
  // A first attempt has none before it, and the scan back to the turn's turn.queued can be long
  // (a producer that queued many turns at once put it far back).
  if (current <= 1) return [];
  const ended = new Set<number>();
  for await (const h of backwards(log, session)) {
    if (h.turn !== turn) continue;
    if (h.kind === "turn.queued") break;
    if (h.kind === "attempt.abandoned") ended.add(h.dataAttempt ?? h.attempt);
    else if (isTerminalKind(h.kind)) ended.add(h.attempt);
  }
  const out: number[] = [];
  for (let a = 1; a < current; a++) if (!ended.has(a)) out.push(a);
  return out;
}

/**
 * The session's conversation so far as text, for a fresh CLI session that has to carry it: each
 * finished turn's prompt and the rendering of its accepted attempt's lines.
 */
export async function rebuildTranscript(
  log: EventLog,
  session: string,
  beforeTurn: string,
): Promise<{ text: string; turns: number }> {
  const prompts = new Map<string, string>();
  const lines = new Map<string, string[]>();
  const order: string[] = [];
  const accepted = new Map<string, number>();
  for await (const ev of log.read(session)) {
    if (ev.turn === beforeTurn) continue;
    if (ev.kind === "turn.queued") {
      const d = dataOf("turn.queued", ev.data);
      if (d !== undefined) prompts.set(ev.turn, d.prompt);
      order.push(ev.turn);
    } else if (ev.kind === "cli.line") {
      const key = `${ev.turn}#${ev.attempt}`;
      const d = dataOf("cli.line", ev.data);
      if (d !== undefined) (lines.get(key) ?? lines.set(key, []).get(key)!).push(d.raw);
    } else if (ev.kind === "turn.finished") {
      accepted.set(ev.turn, dataOf("turn.finished", ev.data)?.attempt ?? ev.attempt);
    }
  }
  const parts: string[] = [];
  let turns = 0;
  for (const t of order) {
    const a = accepted.get(t);
    if (a === undefined) continue;
    turns++;
    parts.push(`User: ${prompts.get(t) ?? ""}`);
    parts.push(renderText(lines.get(`${t}#${a}`) ?? []));
  }
  return { text: parts.join("\n\n"), turns };
}

export function isTerminal(ev: Envelope): boolean {
  return isTerminalKind(ev.kind);
}
