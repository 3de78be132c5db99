// `turnstream sessions`: every session in the log's index with status, turns, cost, last activity,
// from the live read models (or, for a session the projector has not reached, from the log's meta).
import { createEventLog, type EventLog, type RedisClient } from "../../log/index.ts";
import { connectForCommand, createOutput, paint, readSummary, type Output, type Scrub } from "../../projector/index.ts";
import { parseCommandArgs } from "./_args.ts";
import { defaultScrub } from "./_scrub.ts";
import { logPrefix } from "./_connect.ts";

export const summary = "list sessions with status, turns, cost and last activity";

const usage = `usage: turnstream sessions [--json] [--prefix P]
  Lists the sessions of the log's index, most recently active last.
  Figures come from the live read models (run \`turnstream projector\`); a session not projected yet
  shows the log's own state and "-" for the rest.
  --json      one JSON object per session and line
  --prefix P  key prefix (default: TURNSTREAM_PREFIX or "ts:")
`;

interface Row {
  session: string;
  status: string;
  turns: number | null;
  costUsd: number | null;
  lastActivity: string | null;
  lastSeq: number;
  projectedSeq: number | null;
  pendingDecisions: number | null;
  lastErrorKind: string | null;
}

/** A session's figures from its read model, or from the log's meta where the projector has not been. */
async function sessionRow(redis: RedisClient, log: EventLog, session: string): Promise<Row> {
  const [st, s] = await Promise.all([log.stat(session), readSummary(redis, session, log.prefix)]);
  return {
    session,
    status: s?.status ?? st.state ?? "new",
    turns: s?.turns ?? null,
    costUsd: s?.costUsd ?? null,
    lastActivity: s?.lastAt ?? null,
    lastSeq: st.lastSeq,
    projectedSeq: s?.lastSeq ?? null,
    pendingDecisions: s?.pendingDecisions ?? null,
    lastErrorKind: s?.lastErrorKind ?? null,
  };
}

function printTable(out: Output, rows: Row[]): void {
  const head = ["SESSION", "STATUS", "TURNS", "COST", "LAST ACTIVITY", "EVENTS", "PENDING"];
  const table = rows.map((r) => [
    r.session,
    r.status + (r.lastErrorKind !== null && r.status === "failed" ? ` (${r.lastErrorKind})` : ""),
    r.turns === null ? "-" : String(r.turns),
    r.costUsd === null ? "-" : `$${r.costUsd.toFixed(4)}`,
    r.lastActivity ?? "-",
    r.projectedSeq === null || r.projectedSeq === r.lastSeq ? String(r.lastSeq) : `${r.lastSeq} (projected ${r.projectedSeq})`,
    r.pendingDecisions === null ? "-" : String(r.pendingDecisions),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...table.map((row) => row[i]!.length)));
  const fmt = (row: string[]): string => row.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd();
  out.line(paint(out.color, "dim", fmt(head)));
  for (const row of table) out.line(fmt(row));
}

export async function run(argv: string[], scrub?: Scrub): Promise<number> {
  const args = parseCommandArgs("sessions", usage, {
    args: argv,
    allowPositionals: false,
    options: { json: { type: "boolean", default: false }, prefix: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  if (typeof args === "number") return args;
  const { values } = args;
  const out = createOutput(process.stdout, { scrub: scrub ?? defaultScrub() });
  const redis = await connectForCommand();
  try {
    const prefix = logPrefix(values.prefix);
    const log = createEventLog({ redis, prefix });
    const rows = await Promise.all((await log.sessions()).map((session) => sessionRow(redis, log, session)));
    if (values.json) {
      for (const r of rows) out.line(JSON.stringify(r));
    } else if (rows.length === 0) {
      out.line(`no sessions under key prefix "${prefix}"`);
    } else {
      printTable(out, rows);
    }
    await out.drain();
    return 0;
  } finally {
    redis.disconnect();
  }
}
