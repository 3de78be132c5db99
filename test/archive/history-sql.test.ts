// The fleet queries of docs/guides/history-sql.md, run as written against an archived fleet in a real
// PostgreSQL: every ```sql block of the guide is taken from the file (so the guide cannot drift from the
// tables), and each one's figures are checked against a count made here from the events themselves, not
// from the rows the archive derived from them. Also migration 2, the index those queries lean on.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { openArchive, type Archive } from "../../src/archive/index.ts";
import type { Envelope } from "../../src/log/index.ts";
import { isTenantName } from "../../src/tenants/index.ts";
import { copyOf, loggedEvents, uniqueId } from "./_support.ts";

const GUIDE = join(import.meta.dirname, "..", "..", "docs", "guides", "history-sql.md");
const baseUrl = process.env["ARCHIVE_TEST_PG"] ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = `th_${randomBytes(5).toString("hex")}`;
const DATE_OID = 1082;

/** One archived session of the fleet: a recorded log moved to a day, a working directory and labels. */
interface Planned {
  fixture: string;
  day: string;
  cwd: string;
  /** Time between consecutive events, so tool calls take known, different durations. */
  stepMs: number;
  labels?: Record<string, string>;
  /** Whose session it is (its turns' turn.queued `tenant`). */
  tenant?: string;
  /** Its operator decisions lose their signature and name someone else: they must not count. */
  forged?: boolean;
}

const FLEET: Planned[] = [
  {
    fixture: "today-session",
    day: "2026-03-02",
    cwd: "/srv/api",
    stepMs: 2000,
    labels: { repo: "acme/api" },
    tenant: "acme",
  },
  { fixture: "crash-retry", day: "2026-03-02", cwd: "/srv/api", stepMs: 1000, tenant: "globex" },
  {
    fixture: "today-session",
    day: "2026-03-04",
    cwd: "/srv/web",
    stepMs: 500,
    labels: { repo: "acme/web", pr: "7" },
    forged: true,
    tenant: "acme",
  },
  { fixture: "denials", day: "2026-03-10", cwd: "/srv/api", stepMs: 3000, labels: { repo: "acme/api" } },
  // An imported log's tenant that is no tenant name: the session counts as naming none.
  { fixture: "api-errors", day: "2026-03-10", cwd: "/srv/web", stepMs: 1500, tenant: "acme\u001b[2J" },
  {
    fixture: "background-subagent",
    day: "2026-03-11",
    cwd: "/srv/web",
    stepMs: 700,
    labels: { repo: "acme/web" },
    tenant: "acme",
  },
  { fixture: "api-errors", day: "2026-03-17", cwd: "/srv/api", stepMs: 250, labels: { repo: "acme/web" } },
];

type Obj = Record<string, unknown>;
const dataOf = (event: Envelope): Obj => event.data as Obj;

/** The events moved to the plan's day, cwd and labels (the times every `stepMs` from 09:00 UTC). */
function reshape(events: readonly Envelope[], plan: Planned): Envelope[] {
  const start = Date.parse(`${plan.day}T09:00:00.000Z`);
  return events.map((event) => {
    const data: Obj = { ...dataOf(event) };
    if (typeof data["cwd"] === "string") data["cwd"] = plan.cwd;
    if (event.kind === "cli.line") data["raw"] = withCwd(String(data["raw"]), plan.cwd);
    if (event.kind === "turn.queued" && plan.labels !== undefined) data["labels"] = plan.labels;
    if (event.kind === "turn.queued" && plan.tenant !== undefined) data["tenant"] = plan.tenant;
    if (plan.forged === true && event.kind === "decision.made" && data["source"] === "operator") {
      data["by"] = "mallory";
      delete data["keyId"];
      delete data["signature"];
    }
    return { ...event, at: new Date(start + event.seq * plan.stepMs).toISOString(), data };
  });
}

/** A CLI line with the directory its init line reports replaced (other lines, even unreadable ones, kept). */
function withCwd(raw: string, cwd: string): string {
  try {
    const line = JSON.parse(raw) as Obj;
    return line["type"] === "system" && typeof line["cwd"] === "string" ? JSON.stringify({ ...line, cwd }) : raw;
  } catch {
    return raw;
  }
}

interface Archived {
  plan: Planned;
  events: Envelope[];
}

// ---- Counts made here from the events -------------------------------------------------------------

const dayOf = (at: string): string => at.slice(0, 10);

/** The Monday of the UTC week `at` falls in. */
function weekOf(at: string): string {
  const day = new Date(`${dayOf(at)}T00:00:00.000Z`);
  const back = (day.getUTCDay() + 6) % 7;
  return new Date(day.getTime() - back * 86_400_000).toISOString().slice(0, 10);
}

function cliLines(events: readonly Envelope[]): Array<{ event: Envelope; line: Obj }> {
  return events
    .filter((event) => event.kind === "cli.line")
    .flatMap((event) => {
      try {
        return [{ event, line: JSON.parse(String(dataOf(event)["raw"])) as Obj }];
      } catch {
        return [];
      }
    });
}

/** What the CLI reported spending: each CLI session's last running total, added up. */
function spentUsd(events: readonly Envelope[]): number {
  const totals = new Map<string, number>();
  for (const { line } of cliLines(events))
    if (line["type"] === "result" && typeof line["total_cost_usd"] === "number")
      totals.set(String(line["session_id"]), line["total_cost_usd"]);
  return [...totals.values()].reduce((sum, total) => sum + total, 0);
}

interface Call {
  name: string;
  startedAt: string;
  endedAt?: string;
  isError?: boolean;
}

/** Tool calls from the CLI's own lines: a tool_use block opens one, the tool_result naming it closes it. */
function toolCalls(events: readonly Envelope[]): Call[] {
  const calls = new Map<string, Call>();
  for (const { event, line } of cliLines(events)) {
    const content = (line["message"] as Obj | undefined)?.["content"];
    if (!Array.isArray(content)) continue;
    for (const block of content as Obj[]) {
      const key = (id: unknown): string => `${event.turn}|${event.attempt}|${String(id)}`;
      if (line["type"] === "assistant" && block["type"] === "tool_use")
        calls.set(key(block["id"]), { name: String(block["name"]), startedAt: event.at });
      if (line["type"] === "user" && block["type"] === "tool_result") {
        const call = calls.get(key(block["tool_use_id"]));
        if (call !== undefined) Object.assign(call, { endedAt: event.at, isError: block["is_error"] === true });
      }
    }
  }
  return [...calls.values()];
}

/** PostgreSQL's percentile_cont: linear interpolation between the two nearest ranks. */
function percentile(values: readonly number[], fraction: number): number {
  const sorted = [...values].sort((left, right) => left - right);
  const position = fraction * (sorted.length - 1);
  const low = Math.floor(position);
  const high = Math.ceil(position);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (position - low);
}

function increment(counts: Map<string, number>, key: string, by = 1): void {
  counts.set(key, (counts.get(key) ?? 0) + by);
}

const usd = (value: unknown): string => Number(value).toFixed(9);
const seconds = (value: unknown): string => Number(value).toFixed(3);

/** Each check: the rows a guide query must give, as comparable strings, sorted; and the rows it gave. */
interface Check {
  expected: (fleet: readonly Archived[]) => string[];
  actual: (row: Obj) => string;
}

const CHECKS: Record<string, Check> = {
  "cost per cwd per day": {
    expected: (fleet) => {
      const cost = new Map<string, number>();
      const sessions = new Map<string, number>();
      for (const { plan, events } of fleet) {
        const key = `${dayOf(events.at(-1)!.at)} ${plan.cwd}`;
        increment(cost, key, spentUsd(events));
        increment(sessions, key);
      }
      return [...cost].map(([key, usdSpent]) => `${key} ${sessions.get(key)} ${usd(usdSpent)}`);
    },
    actual: (row) => `${String(row["day"])} ${String(row["cwd"])} ${Number(row["sessions"])} ${usd(row["cost_usd"])}`,
  },
  "cost per label per week": {
    expected: (fleet) => {
      const cost = new Map<string, number>();
      const sessions = new Map<string, number>();
      for (const { plan, events } of fleet) {
        const repo = plan.labels?.["repo"];
        if (repo === undefined) continue;
        const key = `${weekOf(events.at(-1)!.at)} ${repo}`;
        increment(cost, key, spentUsd(events));
        increment(sessions, key);
      }
      return [...cost].map(([key, usdSpent]) => `${key} ${sessions.get(key)} ${usd(usdSpent)}`);
    },
    actual: (row) => `${String(row["week"])} ${String(row["repo"])} ${Number(row["sessions"])} ${usd(row["cost_usd"])}`,
  },
  "cost per tenant per week": {
    expected: (fleet) => {
      const cost = new Map<string, number>();
      const sessions = new Map<string, number>();
      for (const { plan, events } of fleet) {
        const tenant = plan.tenant !== undefined && isTenantName(plan.tenant) ? plan.tenant : "(none)";
        const key = `${weekOf(events.at(-1)!.at)} ${tenant}`;
        increment(cost, key, spentUsd(events));
        increment(sessions, key);
      }
      return [...cost].map(([key, usdSpent]) => `${key} ${sessions.get(key)} ${usd(usdSpent)}`);
    },
    actual: (row) =>
      `${String(row["week"])} ${String(row["tenant"])} ${Number(row["sessions"])} ${usd(row["cost_usd"])}`,
  },
  "slowest tools": {
    expected: (fleet) => {
      const durations = new Map<string, number[]>();
      for (const call of fleet.flatMap(({ events }) => toolCalls(events))) {
        if (call.endedAt === undefined) continue;
        const took = (Date.parse(call.endedAt) - Date.parse(call.startedAt)) / 1000;
        durations.set(call.name, [...(durations.get(call.name) ?? []), took]);
      }
      return [...durations].map(([name, took]) => {
        const average = took.reduce((sum, value) => sum + value, 0) / took.length;
        return `${name} ${took.length} ${seconds(average)} ${seconds(percentile(took, 0.95))}`;
      });
    },
    actual: (row) =>
      `${String(row["name"])} ${Number(row["calls"])} ${seconds(row["avg_seconds"])} ${seconds(row["p95_seconds"])}`,
  },
  "tools that fail most": {
    expected: (fleet) => {
      const tally = new Map<string, { calls: number; failed: number; unfinished: number }>();
      for (const call of fleet.flatMap(({ events }) => toolCalls(events))) {
        const counts = tally.get(call.name) ?? { calls: 0, failed: 0, unfinished: 0 };
        counts.calls++;
        if (call.isError === true) counts.failed++;
        if (call.endedAt === undefined) counts.unfinished++;
        tally.set(call.name, counts);
      }
      return [...tally].map(
        ([name, { calls, failed, unfinished }]) =>
          `${name} ${calls} ${failed} ${unfinished} ${((100 * failed) / calls).toFixed(1)}`,
      );
    },
    actual: (row) =>
      `${String(row["name"])} ${Number(row["calls"])} ${Number(row["failed"])} ${Number(row["unfinished"])} ` +
      Number(row["failed_pct"]).toFixed(1),
  },
  "error kinds per week": {
    expected: (fleet) => {
      const failed = new Map<string, number>();
      for (const event of fleet.flatMap(({ events }) => events))
        if (event.kind === "turn.failed")
          increment(failed, `${weekOf(event.at)} ${String(dataOf(event)["errorKind"])}`);
      return [...failed].map(([key, count]) => `${key} ${count}`);
    },
    actual: (row) => `${String(row["week"])} ${String(row["error_kind"])} ${Number(row["failed_turns"])}`,
  },
  "decisions by operator": {
    expected: (fleet) => {
      const allowed = new Map<string, number>();
      const denied = new Map<string, number>();
      for (const event of fleet.flatMap(({ events }) => events)) {
        const data = dataOf(event);
        if (event.kind !== "decision.made" || data["source"] !== "operator") continue;
        // An operator's decision is one the operator signed.
        if (typeof data["keyId"] !== "string" || typeof data["signature"] !== "string") continue;
        const by = String(data["by"]);
        increment(allowed, by, data["decision"] === "allow" ? 1 : 0);
        increment(denied, by, data["decision"] === "deny" ? 1 : 0);
      }
      return [...allowed.keys()].map((by) => `${by} ${allowed.get(by)} ${denied.get(by)}`);
    },
    actual: (row) => `${String(row["operator"])} ${Number(row["allowed"])} ${Number(row["denied"])}`,
  },
};

/** The guide's ```sql blocks, each named by its first line (a `-- title` comment). */
function guideQueries(): Array<{ title: string; sql: string }> {
  const text = readFileSync(GUIDE, "utf8");
  return [...text.matchAll(/^```sql\n([\s\S]*?)^```$/gm)].map((match) => {
    const sql = match[1]!;
    const title = /^-- (.+)$/m.exec(sql.split("\n")[0]!)?.[1];
    assert.ok(title !== undefined, `a query of the guide starts with a "-- title" line:\n${sql}`);
    return { title, sql };
  });
}

let admin: pg.Client;
let archive: Archive;
const fleet: Archived[] = [];

describe("the history guide on an archived fleet", () => {
  before(async () => {
    // Dates as the text PostgreSQL gives (pg would make a local-midnight Date of them).
    admin = new pg.Client({
      connectionString: baseUrl,
      types: {
        getTypeParser: ((oid: number, format?: "text" | "binary") =>
          oid === DATE_OID
            ? (text: string) => text
            : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
      },
    });
    await admin.connect();
    archive = openArchive(`${baseUrl}?schema=${schema}`);
    await archive.migrate();
    for (const plan of FLEET) {
      const session = uniqueId("hs");
      const events = reshape(await loggedEvents(plan.fixture, session), plan);
      await archive.put(copyOf(session, events));
      fleet.push({ plan, events });
    }
    await admin.query(`SET search_path TO "${schema}"`);
  });

  after(async () => {
    await archive.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  describe("the fleet queries of the history guide", () => {
    it("the guide has a checked query for each question, and a check for each query", () => {
      assert.deepEqual(
        guideQueries()
          .map((query) => query.title)
          .sort(),
        Object.keys(CHECKS).sort(),
      );
    });

    it("the fleet has what each question asks about", () => {
      const calls = fleet.flatMap(({ events }) => toolCalls(events));
      assert.ok(calls.some((call) => call.isError === true) && calls.some((call) => call.isError === false));
      assert.ok(
        calls.some((call) => call.endedAt === undefined),
        "a call that never got its result",
      );
      const all = fleet.flatMap(({ events }) => events);
      assert.ok(new Set(all.filter((event) => event.kind === "turn.failed").map((event) => weekOf(event.at))).size > 1);
      const forged = all.filter((event) => event.kind === "decision.made" && dataOf(event)["by"] === "mallory");
      assert.ok(forged.length > 0, "unsigned operator decisions in the fleet");
    });

    for (const [title, check] of Object.entries(CHECKS)) {
      it(`${title}: the guide's query gives what the events say`, async () => {
        const query = guideQueries().find((candidate) => candidate.title === title);
        assert.ok(query !== undefined, `the guide has no query titled "${title}"`);
        const rows = (await admin.query<Obj>(query.sql)).rows;
        const expected = check.expected(fleet).sort();
        assert.ok(expected.length > 1, `the fleet gives "${title}" more than one row to show`);
        assert.deepEqual(rows.map(check.actual).sort(), expected);
      });
    }

    it("an unsigned operator decision is not counted, however it names itself", async () => {
      const query = guideQueries().find((candidate) => candidate.title === "decisions by operator")!;
      const operators = (await admin.query<{ operator: string }>(query.sql)).rows.map((row) => row.operator);
      assert.ok(!operators.includes("mallory"), operators.join(", "));
    });
  });

  describe("migration 2: events by kind and time", () => {
    const indexes = async (): Promise<string[]> =>
      (
        await admin.query<{ indexname: string }>("SELECT indexname FROM pg_indexes WHERE schemaname = $1", [schema])
      ).rows.map((row) => row.indexname);

    it("migrating again is a no-op", async () => {
      const before = await indexes();
      assert.ok(before.includes("turnstream_events_kind_at"), before.join(", "));
      assert.deepEqual((await archive.migrate()).applied, []);
      assert.deepEqual((await archive.migrate()).applied, []);
      assert.deepEqual((await indexes()).sort(), before.sort());
    });

    it("a schema at version 1 gets the index, once", async () => {
      await admin.query(`DROP INDEX "${schema}".turnstream_events_kind_at`);
      await admin.query(`DELETE FROM "${schema}".turnstream_migrations WHERE id = 2`);
      assert.deepEqual((await archive.migrate()).applied, ["2 events by kind and time"]);
      assert.ok((await indexes()).includes("turnstream_events_kind_at"));
      assert.deepEqual((await archive.migrate()).applied, []);
    });

    it("the failures query reads the index instead of every event", async () => {
      const query = guideQueries().find((candidate) => candidate.title === "error kinds per week")!;
      await admin.query("BEGIN");
      try {
        // A small table is cheaper to scan; turned off, the plan shows whether the index can serve.
        await admin.query("SET LOCAL enable_seqscan = off");
        const plan = (await admin.query<{ "QUERY PLAN": string }>(`EXPLAIN ${query.sql}`)).rows;
        assert.match(plan.map((row) => row["QUERY PLAN"]).join("\n"), /turnstream_events_kind_at/);
      } finally {
        await admin.query("ROLLBACK");
      }
    });
  });
});
