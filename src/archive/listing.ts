// An archived session in a listing (`turnstream sessions`, the dashboard's fleet): its line made from
// the summary the archive keeps, so no copy is read, and made by one function so every listing agrees
// with the others, and with the line the session had in Redis, on what a column means.
import type { SessionRow } from "../projector/index.ts";
import { tenantNameProblem } from "../tenants/index.ts";
import type { ArchivedSummary, ArchiveSummariesOptions } from "./archive.ts";
import { InvalidArchiveListingError } from "./errors.ts";

/**
 * The listing line of an archived session. The summary is the projector's fold of the whole log,
 * so its figures are the ones the session's line folded from its log showed; no read model holds an
 * archived session, hence projectedSeq null. Key order is SessionRow's as the projector writes it
 * (a JSON listing of the same session reads the same before and after it is archived).
 */
export function archivedRow(summary: ArchivedSummary): SessionRow {
  const { input, output, cacheRead, cacheCreation } = summary.tokens;
  return {
    session: summary.session,
    status: summary.status,
    turns: summary.turns,
    costUsd: summary.costUsd,
    tokens: { input, output, cacheRead, cacheCreation },
    lastActivity: summary.lastAt,
    lastSeq: summary.lastSeq,
    projectedSeq: null,
    pendingDecisions: summary.decisions.pending,
    lastErrorKind: summary.lastErrorKind,
    tenant: summary.tenant,
    labels: { ...summary.labels },
    cwd: summary.cwd,
  };
}

/** A summary's last activity as milliseconds, or undefined when it has none or it is not a time. */
export function lastActiveMs(summary: ArchivedSummary): number | undefined {
  if (summary.lastAt === null) return undefined;
  const ms = Date.parse(summary.lastAt);
  return Number.isNaN(ms) ? undefined : ms;
}

/** Most recently active first; sessions without a last activity last; ties by id (code-point order). */
export function byRecentActivity(left: ArchivedSummary, right: ArchivedSummary): number {
  const [leftMs, rightMs] = [lastActiveMs(left), lastActiveMs(right)];
  if (leftMs !== rightMs) {
    if (leftMs === undefined) return 1;
    if (rightMs === undefined) return -1;
    return rightMs - leftMs;
  }
  return left.session < right.session ? -1 : left.session > right.session ? 1 : 0;
}

/**
 * The listing's options checked: a whole limit ≥ 0, a `before` that is a time (as milliseconds), a
 * tenant that is a tenant name.
 */
export function listingBounds(options: ArchiveSummariesOptions): {
  limit: number | undefined;
  beforeMs: number | undefined;
  tenant: string | undefined;
} {
  const { limit, before, tenant } = options;
  if (limit !== undefined && !(Number.isSafeInteger(limit) && limit >= 0))
    throw new InvalidArchiveListingError(`limit ${limit} is not a whole number of sessions`);
  const beforeMs = before === undefined ? undefined : Date.parse(before);
  if (beforeMs !== undefined && Number.isNaN(beforeMs))
    throw new InvalidArchiveListingError(`before ${JSON.stringify(before)} is not a time (ISO 8601)`);
  const tenantProblem = tenant === undefined ? undefined : tenantNameProblem(tenant);
  if (tenantProblem !== undefined) throw new InvalidArchiveListingError(tenantProblem);
  return { limit, beforeMs, tenant };
}
