// One session's line in a listing (`turnstream sessions`, the dashboard): the figures of its read
// model, or the log's own state where the projector has not been; and the same line from a state
// folded in memory, so a live view and a listing never disagree on what a column means.
import { z as zod } from "zod";
import { labelNameSchema, labelValueSchema } from "../events/index.ts";
import type { HistoryReader, RedisClient, SessionStat } from "../log/index.ts";
import { isTenantName } from "../tenants/index.ts";
import { foldAsync } from "./reduce.ts";
import { readModelFields } from "./store.ts";
import { summaryOf, type ProjectionState, type SessionSummary, type Tokens } from "./state.ts";

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
  /** Whose session it is (null: none named, or not known without a read model). */
  tenant: string | null;
  /** The labels of its turns, a later turn's value for a name replacing an earlier one's. */
  labels: Record<string, string>;
  /** The working directory its turns were queued with (null: not known without a read model). */
  cwd: string | null;
}

const storedLabelsSchema = zod.record(labelNameSchema, labelValueSchema);

/**
 * The tenant and labels of a summary as a listing may show them. Whoever writes Redis can write a
 * read model: a tenant that is not a tenant name, or labels that break the labels' rules (control or
 * bidi characters), are not shown, as the reducer would not have kept them.
 */
function shownDimensions(summary: SessionSummary | undefined): Pick<SessionRow, "tenant" | "labels"> {
  const tenant = summary?.tenant;
  const labels = storedLabelsSchema.safeParse(summary?.labels ?? {});
  return {
    tenant: typeof tenant === "string" && isTenantName(tenant) ? tenant : null,
    labels: labels.success ? labels.data : {},
  };
}

/** Whether a row is of `tenant` and carries every one of `labels` (a listing's filter). */
export function rowMatches(
  row: Pick<SessionRow, "tenant" | "labels">,
  filter: { tenant?: string | undefined; labels?: Readonly<Record<string, string>> | undefined },
): boolean {
  if (filter.tenant !== undefined && row.tenant !== filter.tenant) return false;
  return Object.entries(filter.labels ?? {}).every(([name, value]) => row.labels[name] === value);
}

/** The stored summary and token counts of a session's read model (one pointer read, one HMGET), or undefined. */
async function storedFigures(
  redis: RedisClient,
  session: string,
  prefix: string,
): Promise<{ summary: SessionSummary; tokens: Tokens | null; cwd: string | null } | undefined> {
  const fields = await readModelFields(redis, session, prefix, ["summary", "core"]);
  if (fields === undefined) return undefined;
  const [summary, core] = fields as [string, string | null];
  // The token counts and the cwd are kept only in the core field.
  const view = core === null ? undefined : (JSON.parse(core) as ProjectionState).view;
  return {
    summary: JSON.parse(summary) as SessionSummary,
    tokens: view?.tokens ?? null,
    cwd: typeof view?.cwd === "string" ? view.cwd : null,
  };
}

/** A session's row and the log's stat it was made with. */
async function statAndRow(
  redis: RedisClient,
  log: HistoryReader,
  session: string,
): Promise<{ st: SessionStat; row: SessionRow }> {
  const [st, stored] = await Promise.all([log.stat(session), storedFigures(redis, session, log.prefix)]);
  const storedSummary = stored?.summary;
  const row: SessionRow = {
    session,
    status: storedSummary?.status ?? st.state ?? "new",
    turns: storedSummary?.turns ?? null,
    costUsd: storedSummary?.costUsd ?? null,
    tokens: stored?.tokens ?? null,
    lastActivity: storedSummary?.lastAt ?? null,
    lastSeq: st.lastSeq,
    projectedSeq: storedSummary?.lastSeq ?? null,
    pendingDecisions: storedSummary?.pendingDecisions ?? null,
    lastErrorKind: storedSummary?.lastErrorKind ?? null,
    ...shownDimensions(storedSummary),
    cwd: stored?.cwd ?? null,
  };
  return { st, row };
}

/** A session's figures from its read model, or from the log's meta where the projector has not been. */
export async function sessionRow(redis: RedisClient, log: HistoryReader, session: string): Promise<SessionRow> {
  return (await statAndRow(redis, log, session)).row;
}

/**
 * Most events of a session without a read model folded for its line: folding reads all of them (their
 * bytes in memory, a round trip per page), so past this a longer log is left to the projector.
 */
export const FOLD_LIMIT = 10_000;

/** Sessions whose lines are read at once: bounds memory when many have no read model. */
export const LISTING_CONCURRENCY = 4;

/** Where a listed row's figures come from: the read model, the log folded now, or the log's meta alone. */
export type RowSource = "projection" | "log" | "meta";

/**
 * A session's line from its read model; without one, folded from a log of at most `foldLimit` events
 * (by `fold`, given the log's last seq; by default the log read up to it), else the log's meta alone.
 */
export async function listingRow(
  redis: RedisClient,
  log: HistoryReader,
  session: string,
  foldLimit = FOLD_LIMIT,
  fold: (lastSeq: number) => Promise<ProjectionState> = (lastSeq) => foldAsync(log.read(session, { toSeq: lastSeq })),
): Promise<{ row: SessionRow; source: RowSource }> {
  const { st, row } = await statAndRow(redis, log, session);
  if (row.projectedSeq !== null) return { row, source: "projection" };
  if (st.length === 0 || st.length > foldLimit) return { row, source: "meta" };
  const state = await fold(row.lastSeq);
  // No read model holds these: projectedSeq stays null.
  return { row: { ...sessionRowOf(session, state, row.lastSeq), projectedSeq: null }, source: "log" };
}

/** `fn` over `items` in order, at most `n` at a time. */
export async function inBatches<T, R>(
  items: readonly T[],
  batchSize: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const out: R[] = [];
  for (let start = 0; start < items.length; start += batchSize)
    out.push(...(await Promise.all(items.slice(start, start + batchSize).map(fn))));
  return out;
}

/** The same line from a state folded up to the log's end (`lastSeq` is the log's). */
export function sessionRowOf(session: string, state: ProjectionState, lastSeq = state.lastSeq): SessionRow {
  const sessionSummary = summaryOf(state);
  return {
    session,
    status: sessionSummary.status,
    turns: sessionSummary.turns,
    costUsd: sessionSummary.costUsd,
    tokens: state.view.tokens,
    lastActivity: sessionSummary.lastAt,
    lastSeq,
    projectedSeq: state.lastSeq,
    pendingDecisions: sessionSummary.pendingDecisions,
    lastErrorKind: sessionSummary.lastErrorKind,
    // A state read back from Redis (the dashboard folds on from the stored one) is a Redis writer's text.
    ...shownDimensions(sessionSummary),
    cwd: state.view.cwd,
  };
}
