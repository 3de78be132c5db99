// The dashboard's routes: pages, the fleet stream, a session (live or at an event), decisions.
// Tenants' limits have theirs in tenant-routes.ts.
import type { IncomingMessage, ServerResponse } from "node:http";
import { z as zod } from "zod";
import { decide, DecisionError, InvalidRuleError, type OperatorKey, type OperatorKeyring } from "../decisions/index.ts";
import type { SessionHistory } from "../archive/index.ts";
import { isValidSessionId, type EventLog } from "../log/index.ts";
import { replaySession, UnknownSessionError, type ProjectionState } from "../projector/index.ts";
import type { Fleet, FleetEvent } from "./fleet.ts";
import { eventStream, jsonBody, readBody, sendJson, sendText } from "./http.ts";
import type { Guard } from "./security.ts";
import {
  noteTrace,
  pageOf,
  resultAt,
  trimResults,
  type SessionPage,
  type SessionPatch,
  type TraceIds,
} from "./session-view.ts";
import type { WatchedSessions } from "./watched.ts";
import type { FleetFacts } from "./fleet-facts.ts";
import type { WorkersReader } from "./workers-view.ts";
import { attr, type StaticFile } from "./static-files.ts";

export interface Ctx {
  log: EventLog;
  /** Where a session view reads: the log, else the archive. */
  history: SessionHistory;
  fleet: Fleet;
  /** Per-session figures the fleet charts are computed from. */
  facts: FleetFacts;
  workers: WorkersReader;
  watched: WatchedSessions;
  guard: Guard;
  files: Map<string, StaticFile>;
  deep: <T>(value: T) => T;
  operatorKey: OperatorKey | undefined;
  trustedKeys: OperatorKeyring | undefined;
  traceUrl: string;
}

export function page(ctx: Ctx, res: ServerResponse, name: string): void {
  const file = ctx.files.get(name);
  if (file === undefined) return sendText(res, 404, "not found");
  const body = name === "index.html" ? file.body.replace("__CSRF__", attr(ctx.guard.csrf)) : file.body;
  sendText(res, 200, body, file.type, { "Cache-Control": name.endsWith(".html") ? "no-store" : "no-cache" });
}

export async function loginRoute(ctx: Ctx, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const token = new URLSearchParams(await readBody(req, 4096)).get("token") ?? "";
  const cookie = ctx.guard.login(token);
  if (cookie === undefined) {
    res.writeHead(303, { Location: "/login#failed" });
    return void res.end();
  }
  res.writeHead(303, { Location: "/", "Set-Cookie": cookie });
  res.end();
}

/** What an SSE message of the fleet carries for each kind of change. */
function payloadOf(event: FleetEvent): unknown {
  switch (event.type) {
    case "row":
      return event.row;
    case "pending":
      return event.pending;
    case "queue":
      return event.queue;
    case "tenants":
      return event.tenants;
    case "cooldowns":
      return event.cooldowns;
  }
}

/** The console's own settings and the whole fleet, then every change as it happens. */
export async function fleetStream(ctx: Ctx, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const es = eventStream(req, res);
  const queued: FleetEvent[] = [];
  let ready = false;
  const send = (e: FleetEvent): void => es.send(e.type, ctx.deep(payloadOf(e)));
  const off = ctx.fleet.subscribe((e) => (ready ? send(e) : queued.push(e)));
  es.closed.addEventListener("abort", off, { once: true });
  es.send(
    "hello",
    ctx.deep({
      operator: ctx.guard.operatorOf(req),
      canDecide: ctx.operatorKey !== undefined,
      traceUrl: ctx.traceUrl,
      prefix: ctx.log.prefix,
    }),
  );
  const [rows, pending, queue, tenants, cooldowns] = await Promise.all([
    ctx.fleet.rows(),
    ctx.fleet.pending(),
    ctx.fleet.queue(),
    ctx.fleet.tenants(),
    ctx.fleet.cooldowns(),
  ]);
  es.send("sessions", ctx.deep(rows));
  es.send("pending", ctx.deep(pending));
  es.send("queue", ctx.deep(queue));
  es.send("tenants", ctx.deep(tenants));
  es.send("cooldowns", ctx.deep(cooldowns));
  ready = true;
  for (const event of queued.splice(0)) send(event);
}

/** A page scrubbed, then its long results cut short (fetched whole when opened). */
function sentPage(ctx: Ctx, page: SessionPage): SessionPage {
  const out = ctx.deep(page);
  for (const turn of out.transcript.turns) for (const attempt of turn.attempts) trimResults(attempt.items);
  return out;
}

function sentPatch(ctx: Ctx, patch: SessionPatch): SessionPatch {
  const out = ctx.deep(patch);
  trimResults(out.items.map((p) => p.item));
  return out;
}

/** The whole text of the result event `seq` recorded (the session folded up to it, as time travel does). */
export async function resultRoute(ctx: Ctx, res: ServerResponse, session: string, seq: number): Promise<void> {
  let state: ProjectionState;
  try {
    state = await replaySession(ctx.history, session, { until: { seq } });
  } catch (err) {
    if (err instanceof UnknownSessionError) return sendJson(res, 404, { error: `no session ${session}` });
    throw err;
  }
  for (const turn of state.transcript.turns) {
    for (const attempt of turn.attempts) {
      const text = resultAt(attempt.items, seq);
      if (text !== undefined) return sendJson(res, 200, { text: ctx.deep(text) });
    }
  }
  sendJson(res, 404, { error: `event ${seq} recorded no tool result` });
}

/** Patches as sent (scrubbed, long results cut), made once however many pages watch. */
const sentPatches = new WeakMap<SessionPatch, SessionPatch>();

/** One session: its state folded from the log, then a patch per new event, from the log's tail. */
export async function sessionStream(
  ctx: Ctx,
  req: IncomingMessage,
  res: ServerResponse,
  session: string,
): Promise<void> {
  const es = eventStream(req, res);
  await ctx.watched.watch(
    session,
    {
      snapshot: (state, traces) =>
        es.send("snapshot", sentPage(ctx, pageOf(session, state, traces, state.lastSeq, ctx.traceUrl))),
      patch(patch) {
        let sent = sentPatches.get(patch);
        if (sent === undefined) sentPatches.set(patch, (sent = sentPatch(ctx, patch)));
        es.send("patch", sent);
      },
      end: () => res.end(),
    },
    es.closed,
  );
}

/** The session as it stood at event `until`, folded like `turnstream replay --until`. */
export async function sessionAt(ctx: Ctx, res: ServerResponse, session: string, until: number): Promise<void> {
  const traces: TraceIds = {};
  const st = await ctx.history.stat(session);
  if (!st.exists && st.length === 0) return sendJson(res, 404, { error: `no session ${session}` });
  const state = await replaySession(ctx.history, session, {
    until: { seq: until },
    observers: [{ onEvent: (env) => noteTrace(traces, env) }],
  });
  sendJson(res, 200, sentPage(ctx, pageOf(session, state, traces, st.lastSeq, ctx.traceUrl)));
}

const decisionBody = zod.strictObject({
  session: zod.string().refine(isValidSessionId, "not a session id"),
  requestId: zod.string().min(1).max(200),
  decision: zod.enum(["allow", "deny"]),
  always: zod.boolean().optional(),
  rule: zod.string().max(2000).optional(),
  reason: zod.string().max(2000).optional(),
  allowRedacted: zod.boolean().optional(),
});

/**
 * A decision, made exactly as `turnstream decide` makes it: signed with the operator key, recorded with the operator's
 * name.
 */
export async function decideRoute(ctx: Ctx, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const refused = ctx.guard.refuseChange(req);
  if (refused !== undefined) return sendJson(res, 403, { error: refused });
  if (ctx.operatorKey === undefined) {
    return sendJson(res, 503, {
      error: "this dashboard cannot decide: start it with TURNSTREAM_OPERATOR_KEY naming your operator key file",
    });
  }
  const body = await jsonBody(req, res, decisionBody, "bad decision", 16 * 1024);
  if (body === undefined) return;
  try {
    const outcome = await decide(
      { log: ctx.log, operatorKey: ctx.operatorKey, trustedKeys: ctx.trustedKeys },
      { ...body, by: ctx.guard.operatorOf(req) },
    );
    sendJson(
      res,
      200,
      ctx.deep({
        applied: outcome.applied,
        decision: outcome.decision.decision,
        by: outcome.decision.by,
        seq: outcome.seq,
        rule: outcome.rule?.pattern ?? null,
      }),
    );
  } catch (err) {
    if (err instanceof DecisionError) return sendJson(res, 409, ctx.deep({ error: err.message, problem: err.problem }));
    if (err instanceof InvalidRuleError) return sendJson(res, 400, ctx.deep({ error: err.message }));
    throw err;
  }
}
