// One session's line in a listing (`turnstream sessions`, the dashboard): the figures of its read
// model, or the log's own state where the projector has not been; and the same line from a state
// folded in memory, so a live view and a listing never disagree on what a column means.
import type { EventLog, RedisClient } from "../log/index.ts";
import { projectionKeys, readPointer, readSummary } from "./store.ts";
import { summaryOf, type ProjectionState, type Tokens } from "./state.ts";

export interface SessionRow {
  session: string;
  status: string;
  turns: number | null;
  costUsd: number | null;
  tokens: Tokens | null;
  lastActivity: string | null;
  lastSeq: number;
  projectedSeq: number | null;
  pendingDecisions: number | null;
  lastErrorKind: string | null;
}

/** The stored session view's token counts (from the small core field), or null. */
async function storedTokens(redis: RedisClient, session: string, prefix: string): Promise<Tokens | null> {
  const base = projectionKeys(prefix, session, 1);
  const version = await readPointer(redis, base);
  if (version === null) return null;
  const core = await redis.hget(base.modelOf(version), "core");
  if (core === null) return null;
  return (JSON.parse(core) as ProjectionState).view.tokens ?? null;
}

/** A session's figures from its read model, or from the log's meta where the projector has not been. */
export async function sessionRow(redis: RedisClient, log: EventLog, session: string): Promise<SessionRow> {
  const [st, s, tokens] = await Promise.all([log.stat(session), readSummary(redis, session, log.prefix), storedTokens(redis, session, log.prefix)]);
  return {
    session,
    status: s?.status ?? st.state ?? "new",
    turns: s?.turns ?? null,
    costUsd: s?.costUsd ?? null,
    tokens,
    lastActivity: s?.lastAt ?? null,
    lastSeq: st.lastSeq,
    projectedSeq: s?.lastSeq ?? null,
    pendingDecisions: s?.pendingDecisions ?? null,
    lastErrorKind: s?.lastErrorKind ?? null,
  };
}

/** The same line from a state folded up to the log's end (`lastSeq` is the log's). */
export function sessionRowOf(session: string, state: ProjectionState, lastSeq = state.lastSeq): SessionRow {
  const s = summaryOf(state);
  return {
    session,
    status: s.status,
    turns: s.turns,
    costUsd: s.costUsd,
    tokens: state.view.tokens,
    lastActivity: s.lastAt,
    lastSeq,
    projectedSeq: state.lastSeq,
    pendingDecisions: s.pendingDecisions,
    lastErrorKind: s.lastErrorKind,
  };
}
