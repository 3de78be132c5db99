// Search through the sessions' transcripts (prompts, assistant text, tool calls and their results),
// most recently active sessions first, bounded in sessions read, results and time. Matching is done
// on the text as the page would show it, scrubbed: a search cannot tell whether a secret the page
// would hide is there (no guessing a token one character at a time). Each result names its turn.
import { forTerminal, TurnstreamError } from "../kernel/index.ts";
import { indexKey, type EventLog, type RedisClient } from "../log/index.ts";
import {
  FOLD_LIMIT,
  foldAsync,
  projectionKeys,
  readPointer,
  type TranscriptItem,
  type TranscriptTurn,
} from "../projector/index.ts";

export const MAX_RESULTS = 50;
/** Sessions read per search, the most recently active first. */
export const MAX_SESSIONS = 5000;
/** A search stops after this long and says how far it got. */
export const BUDGET_MS = 2000;
const CONCURRENCY = 16;
const SNIPPET_CHARS = 80;

export interface SearchHit {
  session: string;
  turn: string;
  /** Where in the turn: prompt, text, tool (a call's name and input), result. */
  where: "prompt" | "text" | "tool" | "result";
  seq: number | null;
  snippet: string;
}

export interface SearchAnswer {
  query: string;
  hits: SearchHit[];
  /** Sessions read, of those in Redis. */
  scanned: number;
  sessions: number;
  /** Stopped before reading every session (results, sessions or time ran out). */
  truncated: boolean;
}

/** A search request that cannot be read (answered 400 with the message). */
export class SearchQueryError extends TurnstreamError {
  constructor(message: string) {
    super(message, { code: "search_query" });
  }
}

export function searchQuery(params: URLSearchParams): string {
  const query = (params.get("q") ?? "").trim();
  if (query.length < 2 || query.length > 200) throw new SearchQueryError("search for 2 to 200 characters");
  return query;
}

/** Texts of a turn that a search looks at, with where they are. */
function* textsOf(turn: TranscriptTurn): Generator<{ where: SearchHit["where"]; seq: number | null; text: string }> {
  if (turn.prompt !== null) yield { where: "prompt", seq: turn.promptSeq, text: turn.prompt };
  const walk = function* (items: readonly TranscriptItem[]): Generator<{
    where: SearchHit["where"];
    seq: number | null;
    text: string;
  }> {
    for (const item of items) {
      if (item.t === "user" || item.t === "text")
        yield { where: item.t === "user" ? "prompt" : "text", seq: item.seq, text: item.text };
      else if (item.t === "tool") {
        yield { where: "tool", seq: item.seq, text: `${item.name} ${JSON.stringify(item.input)}` };
        if (item.result !== null) yield { where: "result", seq: item.result.seq, text: item.result.text };
        yield* walk(item.subagent);
      } else if (item.t === "orphan_result") yield { where: "result", seq: item.result.seq, text: item.result.text };
    }
  };
  for (const attempt of turn.attempts) yield* walk(attempt.items);
}

/** The match in context, on one line. */
function snippetOf(text: string, at: number, length: number): string {
  const start = Math.max(0, at - SNIPPET_CHARS);
  const end = Math.min(text.length, at + length + SNIPPET_CHARS);
  const cut = `${start > 0 ? "…" : ""}${text.slice(start, end)}${end < text.length ? "…" : ""}`;
  return forTerminal(cut.replace(/\s+/g, " "));
}

/**
 * Whether a stored turn's JSON can hold the needle, without parsing it: JSON writes text as is but for
 * quotes, backslashes and control characters, so a needle without them appears in the JSON whenever
 * it appears in a text.
 */
const prefilterable = (needle: string): boolean => !/["\\\u0000-\u001f]/.test(needle);

export interface SearchSources {
  log: EventLog;
  redis: RedisClient;
  /** The dashboard's scrubber over one text. */
  scrub: (text: string) => string;
}

export async function searchTranscripts(
  sources: SearchSources,
  query: string,
  nowMs = Date.now,
): Promise<SearchAnswer> {
  const { log } = sources;
  const needle = query.toLowerCase();
  const startedMs = nowMs();
  const ids = (await sources.redis.zrange(indexKey(log.prefix), 0, -1)).reverse();
  const hits: SearchHit[] = [];
  let scanned = 0;
  const done = (): boolean => hits.length >= MAX_RESULTS || nowMs() - startedMs > BUDGET_MS;
  for (let start = 0; start < Math.min(ids.length, MAX_SESSIONS) && !done(); start += CONCURRENCY) {
    const batch = ids.slice(start, Math.min(start + CONCURRENCY, MAX_SESSIONS));
    const found = await Promise.all(batch.map((session) => searchSession(sources, session, needle)));
    scanned += batch.length;
    for (const sessionHits of found) hits.push(...sessionHits);
  }
  return {
    query,
    hits: hits.slice(0, MAX_RESULTS),
    scanned,
    sessions: ids.length,
    truncated: scanned < ids.length || hits.length > MAX_RESULTS,
  };
}

/** The turns of a session that may hold the needle: from its read model, else its log folded (a short one). */
async function candidateTurns(sources: SearchSources, session: string, needle: string): Promise<TranscriptTurn[]> {
  const { log, redis } = sources;
  const keys = projectionKeys(log.prefix, session, 1);
  const version = await readPointer(redis, keys);
  if (version === null) {
    const st = await log.stat(session);
    if (st.length === 0 || st.length > FOLD_LIMIT) return [];
    return (await foldAsync(log.read(session, { toSeq: st.lastSeq }))).transcript.turns;
  }
  const hash = await redis.hgetall(keys.modelOf(version));
  const turns: TranscriptTurn[] = [];
  for (let index = 0; index < Number(hash["turns"] ?? 0); index++) {
    const raw = hash[`t:${index}`];
    if (raw === undefined || (prefilterable(needle) && !raw.toLowerCase().includes(needle))) continue;
    turns.push((JSON.parse(raw) as { transcript: TranscriptTurn }).transcript);
  }
  return turns;
}

async function searchSession(sources: SearchSources, session: string, needle: string): Promise<SearchHit[]> {
  const hits: SearchHit[] = [];
  for (const turn of await candidateTurns(sources, session, needle)) {
    for (const { where, seq, text } of textsOf(turn)) {
      const shown = sources.scrub(text);
      const at = shown.toLowerCase().indexOf(needle);
      if (at < 0) continue;
      hits.push({ session, turn: turn.turn, where, seq, snippet: snippetOf(shown, at, needle.length) });
      if (hits.length >= MAX_RESULTS) return hits;
    }
  }
  return hits;
}
