// The read-only routes of the console's pictures: a session's timeline, the fleet charts, the
// workers, and search through transcripts. Everything sent is scrubbed like the rest of the console.
import type { ServerResponse } from "node:http";
import type { Envelope } from "../log/index.ts";
import { ChartQueryError, chartQuery, chartsOf, type Charts } from "./charts.ts";
import { sendJson } from "./http.ts";
import type { Ctx } from "./routes.ts";
import { searchQuery, SearchQueryError, searchTranscripts } from "./search.ts";
import { timelineOf } from "./timeline.ts";

/** `GET /api/sessions/<id>/timeline`: each turn's waterfall, from the session's events. */
export async function timelineRoute(ctx: Ctx, res: ServerResponse, session: string): Promise<void> {
  const st = await ctx.history.stat(session);
  if (!st.exists && st.length === 0) return sendJson(res, 404, { error: `no session ${session}` });
  const events: Envelope[] = [];
  for await (const env of ctx.history.read(session, { toSeq: st.lastSeq })) events.push(env);
  sendJson(res, 200, ctx.deep(timelineOf(session, events)));
}

/** `GET /api/charts?window=1h|24h|7d` (or `from`, `to`) `&by=tenant|label:<name>&tenant=`. */
export async function chartsRoute(ctx: Ctx, res: ServerResponse, params: URLSearchParams): Promise<void> {
  let query;
  try {
    query = chartQuery(params, Date.now());
  } catch (err) {
    if (err instanceof ChartQueryError) return sendJson(res, 400, { error: err.message });
    throw err;
  }
  const startedMs = performance.now();
  const read = await ctx.facts.read(query.fromMs);
  const charts: Charts & { unread: number; archivedCapped: boolean; tookMs: number } = {
    ...chartsOf(read.sessions, query),
    unread: read.unread,
    archivedCapped: read.archivedCapped,
    tookMs: Math.round(performance.now() - startedMs),
  };
  sendJson(res, 200, ctx.deep(charts));
}

/** `GET /api/workers`: the registry's workers, what each runs, and running turns whose worker is gone. */
export async function workersRoute(ctx: Ctx, res: ServerResponse): Promise<void> {
  sendJson(res, 200, ctx.deep(await ctx.workers.view()));
}

/** `GET /api/search?q=`: matches in the transcripts, most recently active sessions first. */
export async function searchRoute(ctx: Ctx, res: ServerResponse, params: URLSearchParams): Promise<void> {
  let query;
  try {
    query = searchQuery(params);
  } catch (err) {
    if (err instanceof SearchQueryError) return sendJson(res, 400, { error: err.message });
    throw err;
  }
  const answer = await searchTranscripts(
    { log: ctx.log, redis: ctx.log.redis, scrub: (text) => ctx.deep(text) },
    query,
  );
  sendJson(res, 200, ctx.deep(answer));
}
