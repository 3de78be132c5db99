// The CLI's own metrics, from an OTLP/JSON ExportMetricsServiceRequest to increments of the worker's
// instruments. An allow-list by metric name: each kept metric names the worker instrument it feeds
// and the attributes it keeps, each with a closed set of values (anything else is "other"), so the
// series stay few and no id, path or text leaves (session.id, user.id, organization.id, user.email,
// user.account_uuid, terminal.type, the model and every name not listed are dropped). The CLI is
// asked for delta temporality; a cumulative series (an older CLI, or a tool posting with the token)
// counts only its rise since the process's last point of it, so nothing is counted twice.
import { createHash } from "node:crypto";
import { isObj } from "../../kernel/index.ts";
import { arrayField } from "./spans.ts";

/** The value of an attribute outside its set, or missing. */
const OTHER = "other";

export const LINE_TYPES = ["added", "removed", OTHER] as const;
export const ACTIVE_TIME_TYPES = ["user", "cli", OTHER] as const;
export const EDIT_TOOLS = ["Edit", "Write", "NotebookEdit", "MultiEdit", OTHER] as const;
export const EDIT_DECISIONS = ["accept", "reject", OTHER] as const;
export const EDIT_SOURCES = [
  "config",
  "hook",
  "classifier",
  "user_permanent",
  "user_temporary",
  "user_abort",
  "user_reject",
  "unknown",
  OTHER,
] as const;
/** The languages the CLI names by file extension that get a value of their own. */
export const EDIT_LANGUAGES = [
  "TypeScript",
  "JavaScript",
  "Python",
  "Ruby",
  "Go",
  "Rust",
  "Java",
  "Kotlin",
  "Scala",
  "Swift",
  "C",
  "C++",
  "C#",
  "PHP",
  "Shell",
  "SQL",
  "Markdown",
  "JSON",
  "YAML",
  "TOML",
  "HTML",
  "CSS",
  "SCSS",
  "Dockerfile",
  "Makefile",
  OTHER,
] as const;

/** The worker instruments the CLI's metrics feed (keys of METRICS in src/metrics/names.ts). */
export type CliInstrument =
  "cliLinesOfCode" | "cliCommits" | "cliPullRequests" | "cliCodeEditDecisions" | "cliActiveTime";

/** A kept attribute: the worker's name for it and the values it may take. */
export interface KeptAttribute {
  readonly key: string;
  readonly values: readonly string[];
}

export interface CliMetricDef {
  readonly instrument: CliInstrument;
  /** By the CLI's attribute name. */
  readonly attributes: Readonly<Record<string, KeptAttribute>>;
}

/** The CLI's metrics the worker keeps, by the CLI's metric name. */
export const CLI_METRICS: Readonly<Record<string, CliMetricDef>> = {
  "claude_code.lines_of_code.count": {
    instrument: "cliLinesOfCode",
    attributes: { type: { key: "turnstream.cli.lines.type", values: LINE_TYPES } },
  },
  "claude_code.commit.count": { instrument: "cliCommits", attributes: {} },
  "claude_code.pull_request.count": { instrument: "cliPullRequests", attributes: {} },
  "claude_code.code_edit_tool.decision": {
    instrument: "cliCodeEditDecisions",
    attributes: {
      tool_name: { key: "gen_ai.tool.name", values: EDIT_TOOLS },
      decision: { key: "turnstream.cli.edit.decision", values: EDIT_DECISIONS },
      source: { key: "turnstream.cli.edit.source", values: EDIT_SOURCES },
      language: { key: "turnstream.cli.edit.language", values: EDIT_LANGUAGES },
    },
  },
  "claude_code.active_time.total": {
    instrument: "cliActiveTime",
    attributes: { type: { key: "turnstream.cli.active_time.type", values: ACTIVE_TIME_TYPES } },
  },
};

/**
 * The worker attributes of a kept CLI metric, as src/metrics/names.ts lists them (one definition:
 * the table above).
 */
export function cliMetricAttributes(instrument: CliInstrument): Record<string, readonly string[]> {
  const def = Object.values(CLI_METRICS).find((d) => d.instrument === instrument)!;
  return Object.fromEntries(Object.values(def.attributes).map((kept) => [kept.key, kept.values]));
}

/**
 * The CLI's metrics the worker knows and does not keep: it counts sessions (attempts and warm starts),
 * tokens and cost itself, from the CLI's result lines and its gateway's model calls.
 */
export const CLI_METRICS_NOT_KEPT: ReadonlySet<string> = new Set([
  "claude_code.session.count",
  "claude_code.cost.usage",
  "claude_code.token.usage",
]);

/** One increment of a worker instrument, its attributes already from the closed sets. */
export interface CliMetricIncrement {
  readonly instrument: CliInstrument;
  readonly attributes: Readonly<Record<string, string>>;
  readonly value: number;
}

/** What became of the points of a request: recorded, not kept, unknown, or refused (malformed). */
export interface MetricPointCounts {
  recorded: number;
  notKept: number;
  unknown: number;
  refused: number;
}

export const emptyPointCounts = (): MetricPointCounts => ({ recorded: 0, notKept: 0, unknown: 0, refused: 0 });

/** A CLI process's cumulative series, so each cumulative point counts only its rise. */
export class CumulativeSeries {
  /** Most series a process may have: their count grows with what it posts, and a tool may post. */
  static readonly MAX = 256;
  readonly #last = new Map<string, number>();

  /** What `value` adds to the series `key`; undefined when the series is new and the table full. */
  rise(key: string, value: number): number | undefined {
    const last = this.#last.get(key);
    if (last === undefined && this.#last.size >= CumulativeSeries.MAX) return undefined;
    this.#last.set(key, value);
    // A value below the last one is a reset: the series counts from 0 again.
    return last === undefined || value < last ? value : value - last;
  }
}

const DELTA = 1;
const CUMULATIVE = 2;

/** The increments of one request, and what became of each of its points. */
interface Conversion {
  increments: CliMetricIncrement[];
  counts: MetricPointCounts;
}

/** The increments of one request (its parsed JSON body), with what became of each point. */
export function cliMetricIncrements(body: unknown, series: CumulativeSeries): Conversion {
  const out: Conversion = { increments: [], counts: emptyPointCounts() };
  for (const resourceMetrics of arrayField(body, "resourceMetrics"))
    for (const scopeMetrics of arrayField(resourceMetrics, "scopeMetrics"))
      for (const metric of arrayField(scopeMetrics, "metrics")) convertMetric(metric, series, out);
  return out;
}

/** The kept metric named `name`; own keys only (a name like `constructor` is no metric). */
function keptMetric(name: string): CliMetricDef | undefined {
  return Object.hasOwn(CLI_METRICS, name) ? CLI_METRICS[name] : undefined;
}

function convertMetric(metric: unknown, series: CumulativeSeries, out: Conversion): void {
  const name = isObj(metric) && typeof metric["name"] === "string" ? metric["name"] : "";
  const sum = isObj(metric) ? metric["sum"] : undefined;
  const points = arrayField(sum, "dataPoints");
  // A metric without points still counts once: a post of nothing but names shows too.
  const pointCount = Math.max(1, points.length);
  const def = keptMetric(name);
  if (def === undefined) {
    if (CLI_METRICS_NOT_KEPT.has(name)) out.counts.notKept += pointCount;
    else out.counts.unknown += pointCount;
    return;
  }
  const temporality = isObj(sum) ? sum["aggregationTemporality"] : undefined;
  const monotonic = isObj(sum) && sum["isMonotonic"] === true;
  if (!monotonic || (temporality !== DELTA && temporality !== CUMULATIVE)) {
    out.counts.refused += pointCount;
    return;
  }
  for (const point of points) {
    const value = pointValue(point);
    const increment = value === undefined || temporality === DELTA ? value : series.rise(seriesKey(name, point), value);
    if (increment === undefined) {
      out.counts.refused++;
      continue;
    }
    out.counts.recorded++;
    if (increment > 0)
      out.increments.push({ instrument: def.instrument, attributes: keptAttributes(def, point), value: increment });
  }
}

/** A point's value: a finite, non-negative number. */
function pointValue(point: unknown): number | undefined {
  if (!isObj(point)) return undefined;
  const raw = point["asDouble"] ?? point["asInt"];
  const value = typeof raw === "number" ? raw : typeof raw === "string" ? Number(raw) : Number.NaN;
  return Number.isFinite(value) && value >= 0 ? value : undefined;
}

/** A cumulative series: its metric, start time and every attribute as sent, hashed (they may be long). */
function seriesKey(name: string, point: unknown): string {
  const start = isObj(point) ? String(point["startTimeUnixNano"]) : "";
  const attributes = JSON.stringify(isObj(point) ? (point["attributes"] ?? null) : null);
  return createHash("sha256").update(`${name}\0${start}\0${attributes}`).digest("base64url");
}

/** The kept attributes: each listed one with its value from the set (else "other"); nothing else. */
function keptAttributes(def: CliMetricDef, point: unknown): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const attribute of Object.values(def.attributes)) kept[attribute.key] = OTHER;
  for (const item of arrayField(point, "attributes")) {
    if (!isObj(item) || typeof item["key"] !== "string" || !Object.hasOwn(def.attributes, item["key"])) continue;
    const attribute = def.attributes[item["key"]]!;
    const value = isObj(item["value"]) ? item["value"]["stringValue"] : undefined;
    if (typeof value === "string" && attribute.values.includes(value)) kept[attribute.key] = value;
  }
  return kept;
}

/** Where the kept increments go, and where the receiver's own counts are read: the worker's meter. */
export interface CliMetricsSink {
  add(increments: readonly CliMetricIncrement[]): void;
  /** The receiver's running counts, read when the worker's metrics are collected. */
  watch(stats: Readonly<CliOtlpStats>): void;
}

/** What a receiver did since it started (its stats). */
export interface CliOtlpStats {
  /** Spans handed to the worker's processors. */
  spans: number;
  /** Spans refused: another trace than their token's, malformed, no attempt bound. */
  refusedSpans: number;
  /** Requests refused for want of a live token. */
  unauthorized: number;
  /** Logs requests, and metrics requests while the worker keeps no metrics: read and dropped. */
  dropped: number;
  /** The metric points received with a live token, by what became of them. */
  metricPoints: MetricPointCounts;
}
