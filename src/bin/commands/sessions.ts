// `turnstream sessions`: every session in the log's index with status, turns, cost, last activity,
// from the live read models, or, for a session the projector has not reached, folded from the log
// itself with the projector's reducer (bounded: a long log is left to the projector). Sessions
// retention moved out of Redis are listed from the summaries the archive keeps: no copy is read.
import { archivedRow, type ArchiveCorruptError, type SessionHistory } from "../../archive/index.ts";
import type { RedisClient } from "../../log/index.ts";
import {
  connectForCommand,
  createOutput,
  FOLD_LIMIT,
  inBatches,
  LISTING_CONCURRENCY,
  listingRow,
  paint,
  rowMatches,
  type Output,
  type RowSource,
  type Scrub,
  type SessionRow,
} from "../../projector/index.ts";
import { EXIT } from "../exit-codes.ts";
import { parseCommandArgs } from "./_args.ts";
import { defaultScrub } from "./_scrub.ts";
import { forTerminal } from "../../kernel/index.ts";
import { labelNameSchema } from "../../events/index.ts";
import { tenantNameProblem } from "../../tenants/index.ts";
import { ARCHIVE_FLAG_OPTIONS, ARCHIVE_FLAG_USAGE, logPrefix, openHistory } from "./_connect.ts";

export const summary = "list sessions with status, turns, cost and last activity";

const usage = `usage: turnstream sessions [--json] [--tenant T] [--label name=value …] [--prefix P] [--fold-limit N]
                           [--archive URL]
  Lists the sessions of the log's index, most recently active last; with an archive, the sessions
  retention moved out of Redis first, from the summaries the archive keeps (most recently active last).
  Figures come from the live read models (run \`turnstream projector\`); a session not projected yet
  is folded from its log when it holds at most --fold-limit events, else shows "-" for them.
  --json              one JSON object per session and line (with its tenant and labels)
  --tenant T          only the sessions of tenant T
  --label name=value  only the sessions whose turns carry this label (a later turn's value counts);
                      repeat it: every one must match
  --prefix P          key prefix (default: TURNSTREAM_PREFIX or "ts:")
  --fold-limit N      most events of a session read to fold it (default ${FOLD_LIMIT}; 0: never)
  A session whose figures show "-" has no read model to tell its tenant and labels: a filter leaves it out.
${ARCHIVE_FLAG_USAGE}`;

/**
 * A listed row, where its figures come from (the read model, the log folded now, or the log's meta
 * alone), and when the session was imported (`turnstream import`), or null.
 */
type Row = SessionRow & { source: RowSource; imported: string | null };

/** A session's row from its read model; without one, folded from a log of at most `foldLimit` events. */
async function rowOf(redis: RedisClient, history: SessionHistory, session: string, foldLimit: number): Promise<Row> {
  const listed = listingRow(redis, history, session, foldLimit);
  const [{ row, source }, imported] = await Promise.all([listed, history.importedAt(session)]);
  return { ...row, source, imported: imported ?? null };
}

/**
 * The archived sessions Redis's index no longer holds, least recently active first, from their
 * summaries. Their figures were folded from the log when it was archived: source "log", as the line
 * the session had in Redis before the projector reached it. An edited summary is left out, and said.
 */
async function archivedRows(
  history: SessionHistory,
  inRedis: ReadonlySet<string>,
  tenant: string | undefined,
): Promise<Row[]> {
  if (history.archive === undefined) return [];
  const onCorrupt = (err: ArchiveCorruptError): void => {
    process.stderr.write(`turnstream sessions: left out of the listing: ${err.message}\n`);
  };
  const listed = await history.archive.summaries({ onCorrupt, tenant });
  return listed
    .filter(({ summary }) => !inRedis.has(summary.session))
    .reverse()
    .map(({ summary, importedAt }) => ({ ...archivedRow(summary), source: "log" as const, imported: importedAt }));
}

/** --fold-limit as a number, or undefined (after saying why) when it is not a whole number. */
function foldLimitOf(text: string | undefined): number | undefined {
  if (text === undefined) return FOLD_LIMIT;
  if (/^\d{1,9}$/.test(text)) return Number(text);
  process.stderr.write(`turnstream sessions: --fold-limit takes a whole number of events, got '${text}'\n${usage}`);
  return undefined;
}

/** What --tenant and --label ask for, or undefined (after saying why) when one is not valid. */
function filterOf(
  tenant: string | undefined,
  labelFlags: readonly string[],
): { tenant?: string | undefined; labels: Record<string, string> } | undefined {
  const refuse = (problem: string): undefined => {
    process.stderr.write(`turnstream sessions: ${forTerminal(problem)}\n${usage}`);
    return undefined;
  };
  const tenantProblem = tenant === undefined ? undefined : tenantNameProblem(tenant);
  if (tenantProblem !== undefined) return refuse(`--tenant: ${tenantProblem}`);
  const labels: Record<string, string> = {};
  for (const flag of labelFlags) {
    const eq = flag.indexOf("=");
    if (eq <= 0) return refuse(`--label takes name=value, got '${flag}'`);
    const [name, value] = [flag.slice(0, eq), flag.slice(eq + 1)];
    if (!labelNameSchema.safeParse(name).success)
      return refuse(`--label: '${name}' is not a label name (a lowercase letter, then up to 62 of a-z 0-9 _ . -)`);
    labels[name] = value;
  }
  return { tenant, labels };
}

function printTable(out: Output, rows: Row[]): void {
  const head = ["SESSION", "STATUS", "TURNS", "COST", "LAST ACTIVITY", "EVENTS", "PENDING", "TENANT"];
  // Ids and statuses come from Redis, which others write: escaped before they reach the terminal.
  const table = rows.map((row) => [
    forTerminal(row.session) + (row.imported === null ? "" : " (imported)"),
    forTerminal(row.status + (row.lastErrorKind !== null && row.status === "failed" ? ` (${row.lastErrorKind})` : "")),
    row.turns === null ? "-" : String(row.turns),
    row.costUsd === null ? "-" : `$${row.costUsd.toFixed(4)}`,
    forTerminal(row.lastActivity ?? "-"),
    row.projectedSeq === null || row.projectedSeq === row.lastSeq
      ? String(row.lastSeq)
      : `${row.lastSeq} (projected ${row.projectedSeq})`,
    row.pendingDecisions === null ? "-" : String(row.pendingDecisions),
    forTerminal(row.tenant ?? "-"),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...table.map((row) => row[i]!.length)));
  const fmt = (row: string[]): string =>
    row
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  out.line(paint(out.color, "dim", fmt(head)));
  for (const row of table) out.line(fmt(row));
}

export async function run(argv: string[], scrub?: Scrub): Promise<number> {
  const args = parseCommandArgs("sessions", usage, {
    args: argv,
    allowPositionals: false,
    options: {
      json: { type: "boolean", default: false },
      prefix: { type: "string" },
      "fold-limit": { type: "string" },
      tenant: { type: "string" },
      label: { type: "string", multiple: true },
      ...ARCHIVE_FLAG_OPTIONS,
      help: { type: "boolean", short: "h" },
    },
  });
  if (typeof args === "number") return args;
  const { values } = args;
  const foldLimit = foldLimitOf(values["fold-limit"]);
  if (foldLimit === undefined) return EXIT.usage;
  const filter = filterOf(values.tenant, values.label ?? []);
  if (filter === undefined) return EXIT.usage;
  const out = createOutput(process.stdout, { scrub: scrub ?? defaultScrub() });
  const redis = await connectForCommand();
  let history: SessionHistory | undefined;
  try {
    const prefix = logPrefix(values.prefix);
    const opened = (history = await openHistory(redis, prefix, values.archive));
    const inRedis = await opened.log.sessions();
    const rows = [
      ...(await archivedRows(opened, new Set(inRedis), filter.tenant)),
      ...(await inBatches(inRedis, LISTING_CONCURRENCY, (session) => rowOf(redis, opened, session, foldLimit))),
    ].filter((row) => rowMatches(row, filter));
    if (values.json) {
      for (const row of rows) out.line(JSON.stringify(row));
    } else if (rows.length === 0) {
      const filtered = filter.tenant !== undefined || Object.keys(filter.labels).length > 0;
      out.line(`no sessions${filtered ? " match" : ""} under key prefix "${prefix}"`);
    } else {
      printTable(out, rows);
    }
    await out.drain();
    return 0;
  } finally {
    await history?.close();
    redis.disconnect();
  }
}
