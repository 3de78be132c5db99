// Questions a session's log answers by reading it: where its latest snapshot is, which attempts of a
// turn began but never ended (their worker died), the CLI session its turns last reported, the cwd of
// the attempt that wrote an event, and its finished turns for a transcript. Backward scans read the
// stream's stored envelope (`e`, see README.md) for kind/turn/attempt only, and decode the one event
// they need through the log's own reader.
import { currentKind, dataOf, isTerminalKind, type TurnParkedData } from "../events/index.ts";
import type { EventLog, SnapshotRef } from "./event-log.ts";
import { storedEnvelope, storedHead } from "./stored-head.ts";

interface Head {
  seq: number;
  kind: string;
  turn: string;
  attempt: number;
  epoch: number;
  at: string;
  /** The attempt an attempt.abandoned names in its data (the only data a scan reads). */
  dataAttempt: number | undefined;
}

// Most scans end a few entries back (the previous turn's snapshot sits right before its
// turn.finished): the first page is small, later ones grow, so a short scan does not fetch (and
// decode) hundreds of entries with their data.
const FIRST_PAGE = 4;
const MAX_PAGE = 256;

function headOf(seq: number, env: string | undefined): Head | undefined {
  const head = storedHead(env);
  // Only an abandonment's own data is needed (which attempt it abandons): parse just those.
  if (head !== undefined && head.kind !== "attempt.abandoned") return { seq, ...head, dataAttempt: undefined };
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
      const head = headOf(seq, storedEnvelope(fields));
      if (head !== undefined) yield head;
      if (++seen >= limit) return;
      if (seq <= 1) return;
    }
    if (page.length < size) return;
    const last = page[page.length - 1]![0];
    end = `0-${Number(last.slice(last.indexOf("-") + 1)) - 1}`;
  }
}

/** Where the session's latest `session.snapshot` is, found by scanning back; undefined when it has none. */
export async function latestSnapshotRef(log: EventLog, session: string): Promise<SnapshotRef | undefined> {
  for await (const head of backwards(log, session)) {
    if (head.kind === "session.snapshot") return { seq: head.seq, epoch: head.epoch, at: head.at };
  }
  return undefined;
}

/**
 * The CLI session id the session's turns last reported (turn.finished, session.replaced, or
 * session.replayed: its older name, which logs already hold).
 */
export async function lastCliSessionId(log: EventLog, session: string): Promise<string | undefined> {
  for await (const head of backwards(log, session, 20_000)) {
    if (head.kind !== "turn.finished" && currentKind(head.kind) !== "session.replaced") continue;
    for await (const ev of log.read(session, { fromSeq: head.seq, toSeq: head.seq })) {
      const data = ev.kind === "turn.finished" ? dataOf("turn.finished", ev.data) : dataOf("session.replaced", ev.data);
      if (data?.cliSessionId !== undefined) return data.cliSessionId;
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
  for await (const head of backwards(log, session, 20_000, seq)) {
    writer ??= { turn: head.turn, attempt: head.attempt };
    if (head.turn !== writer.turn) continue; // unfenced events of other turns may sit in between
    if (head.kind === "attempt.started" && head.attempt === writer.attempt)
      return (await eventAt(log, session, head.seq, "attempt.started"))?.cwd;
    if (head.kind === "turn.queued") return (await eventAt(log, session, head.seq, "turn.queued"))?.cwd;
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
  for await (const head of backwards(log, session)) {
    if (head.turn !== turn) continue;
    if (head.kind === "turn.queued") break;
    if (head.kind === "attempt.abandoned") ended.add(head.dataAttempt ?? head.attempt);
    else if (isTerminalKind(head.kind) || head.kind === "turn.parked") ended.add(head.attempt);
  }
  const dangling: number[] = [];
  for (let attempt = 1; attempt < current; attempt++) if (!ended.has(attempt)) dangling.push(attempt);
  return dangling;
}

/** The turn's latest `turn.parked`, found by scanning back to its turn.queued; undefined when it never parked. */
export async function latestParked(
  log: EventLog,
  session: string,
  turn: string,
): Promise<{ seq: number; epoch: number; data: TurnParkedData } | undefined> {
  for await (const head of backwards(log, session)) {
    if (head.turn !== turn) continue;
    if (head.kind === "turn.queued") return undefined;
    if (head.kind !== "turn.parked") continue;
    for await (const ev of log.read(session, { fromSeq: head.seq, toSeq: head.seq })) {
      const data = dataOf("turn.parked", ev.data);
      if (data !== undefined) return { seq: ev.seq, epoch: ev.epoch, data };
    }
    return undefined;
  }
  return undefined;
}

/** One finished turn as a transcript carries it: its prompt and the raw CLI lines of its accepted attempt. */
export interface FinishedTurn {
  turn: string;
  prompt: string;
  lines: string[];
}

/** The session's finished turns before `beforeTurn`, in the order they were queued. */
export async function finishedTurns(log: EventLog, session: string, beforeTurn: string): Promise<FinishedTurn[]> {
  const prompts = new Map<string, string>();
  const lines = new Map<string, string[]>();
  const order: string[] = [];
  const accepted = new Map<string, number>();
  for await (const ev of log.read(session)) {
    if (ev.turn === beforeTurn) continue;
    if (ev.kind === "turn.queued") {
      const data = dataOf("turn.queued", ev.data);
      if (data !== undefined) prompts.set(ev.turn, data.prompt);
      order.push(ev.turn);
    } else if (ev.kind === "cli.line") {
      const key = `${ev.turn}#${ev.attempt}`;
      const data = dataOf("cli.line", ev.data);
      if (data !== undefined) (lines.get(key) ?? lines.set(key, []).get(key)!).push(data.raw);
    } else if (ev.kind === "turn.finished") {
      accepted.set(ev.turn, dataOf("turn.finished", ev.data)?.attempt ?? ev.attempt);
    }
  }
  const finished: FinishedTurn[] = [];
  for (const turn of order) {
    const attempt = accepted.get(turn);
    if (attempt === undefined) continue;
    finished.push({ turn, prompt: prompts.get(turn) ?? "", lines: lines.get(`${turn}#${attempt}`) ?? [] });
  }
  return finished;
}

/**
 * The raw `cli.line` texts among the session's events `fromSeq`..`toSeq`, in order: for reading what
 * the CLI reported near an event without the caller decoding the log's events.
 */
export async function cliLinesBetween(
  log: EventLog,
  session: string,
  fromSeq: number,
  toSeq: number,
): Promise<string[]> {
  const lines: string[] = [];
  for await (const ev of log.read(session, { fromSeq: Math.max(1, fromSeq), toSeq })) {
    const raw = ev.kind === "cli.line" ? dataOf("cli.line", ev.data)?.raw : undefined;
    if (raw !== undefined) lines.push(raw);
  }
  return lines;
}
