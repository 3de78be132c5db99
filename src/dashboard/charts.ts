// The fleet charts over a window (the last hour, day or week, or a from–to): turns by outcome over
// time, cost by tenant or by a label, p50/p95 turn duration over time, failed turns by error kind and
// tools by failure rate. Aggregated here, so the page gets a few hundred numbers whatever the fleet's
// size, from the figures fleet-facts.ts keeps per session.
import { TurnstreamError } from "../kernel/index.ts";
import type { SessionFacts, TurnFact } from "./fleet-facts.ts";

export const WINDOWS = { "1h": 3_600_000, "24h": 86_400_000, "7d": 7 * 86_400_000 } as const;
/** The longest from–to a page may ask for. */
const MAX_SPAN_MS = 92 * 86_400_000;
/** Bucket widths the time charts choose from: the narrowest giving at most MAX_BUCKETS buckets. */
const STEPS_MS = [60, 300, 600, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86_400, 7 * 86_400].map(
  (seconds) => seconds * 1000,
);
const MAX_BUCKETS = 60;
/** Groups (tenants, label values) and tools shown by name; the rest add up under "other". */
const TOP = 12;
const ENDED = ["finished", "failed", "cancelled"] as const;

export interface ChartQuery {
  fromMs: number;
  toMs: number;
  /** `tenant`, or `label:<name>`. */
  by: string;
  /** Only this tenant's sessions (`-`: those without one); undefined: all. */
  tenant: string | undefined;
}

export interface Bucket {
  atMs: number;
  finished: number;
  failed: number;
  cancelled: number;
  /** Turn durations (first start to end) of the turns that ended in it; null when none did. */
  p50Ms: number | null;
  p95Ms: number | null;
}

export interface Charts {
  fromMs: number;
  toMs: number;
  stepMs: number;
  by: string;
  /** What `by` may be: tenant, and every label name the window's turns carry. */
  groupings: string[];
  buckets: Bucket[];
  totals: {
    sessions: number;
    turns: number;
    finished: number;
    failed: number;
    cancelled: number;
    costUsd: number;
    p50Ms: number | null;
    p95Ms: number | null;
  };
  /** Cost of the window's turns per group, the costliest first. */
  cost: Array<{ key: string; costUsd: number; turns: number }>;
  errorKinds: Array<{ kind: string; turns: number }>;
  /** Tools with the most calls, each with its failures and rate. */
  tools: Array<{ name: string; calls: number; errors: number; rate: number }>;
}

/** A charts request whose window or grouping cannot be read (answered 400 with the message). */
export class ChartQueryError extends TurnstreamError {
  constructor(message: string) {
    super(message, { code: "chart_query" });
  }
}

function timeOf(text: string, name: string): number {
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) throw new ChartQueryError(`${name} is not a time`);
  return ms;
}

/** The query of `?window=1h|24h|7d` or `?from=&to=` (ISO times), `&by=tenant|label:<name>`, `&tenant=`. */
export function chartQuery(params: URLSearchParams, nowMs: number): ChartQuery {
  const from = params.get("from");
  const to = params.get("to");
  let fromMs: number;
  let toMs: number;
  if (from !== null || to !== null) {
    if (from === null || to === null) throw new ChartQueryError("from and to go together");
    fromMs = timeOf(from, "from");
    toMs = timeOf(to, "to");
    if (toMs <= fromMs) throw new ChartQueryError("to must be after from");
    if (toMs - fromMs > MAX_SPAN_MS) throw new ChartQueryError("a window may span at most 92 days");
  } else {
    const window = params.get("window") ?? "24h";
    if (!Object.hasOwn(WINDOWS, window)) throw new ChartQueryError("window is 1h, 24h or 7d");
    toMs = nowMs;
    fromMs = nowMs - WINDOWS[window as keyof typeof WINDOWS];
  }
  const by = params.get("by") ?? "tenant";
  if (by !== "tenant" && !/^label:[a-z][a-z0-9_.-]{0,62}$/.test(by))
    throw new ChartQueryError("by is tenant or label:<name>");
  const tenant = params.get("tenant") ?? undefined;
  if (tenant !== undefined && tenant.length > 200) throw new ChartQueryError("not a tenant");
  return { fromMs, toMs, by, tenant: tenant === "" ? undefined : tenant };
}

/** The nearest-rank quantile of sorted numbers, or null for none. */
function quantile(sorted: readonly number[], fraction: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1))]!;
}

const sortedNumbers = (values: number[]): number[] => values.sort((a, b) => a - b);

/** The `TOP` largest entries by `size`, the rest summed into one "other" entry by `merge`. */
function topWithOther<T>(entries: T[], size: (entry: T) => number, other: (rest: T[]) => T): T[] {
  const sorted = entries.sort((a, b) => size(b) - size(a));
  if (sorted.length <= TOP) return sorted;
  return [...sorted.slice(0, TOP - 1), other(sorted.slice(TOP - 1))];
}

const tenantMatches = (facts: SessionFacts, tenant: string | undefined): boolean =>
  tenant === undefined || (tenant === "-" ? facts.tenant === null : facts.tenant === tenant);

/** The group a turn's cost counts under. */
function groupOf(by: string, facts: SessionFacts, turn: TurnFact): string {
  if (by === "tenant") return facts.tenant ?? "(no tenant)";
  const value = turn.labels[by.slice("label:".length)];
  return value === undefined ? "(no label)" : value;
}

/** The charts of every turn placed in [fromMs, toMs) (by its end, else its start). */
export function chartsOf(sessions: readonly SessionFacts[], query: ChartQuery): Charts {
  const { fromMs, toMs, by } = query;
  const stepMs = STEPS_MS.find((step) => (toMs - fromMs) / step <= MAX_BUCKETS) ?? STEPS_MS.at(-1)!;
  const firstMs = Math.floor(fromMs / stepMs) * stepMs;
  const count = Math.max(1, Math.ceil((toMs - firstMs) / stepMs));
  const counts = Array.from({ length: count }, () => ({ finished: 0, failed: 0, cancelled: 0 }));
  const durations: number[][] = Array.from({ length: count }, () => []);
  const cost = new Map<string, { costUsd: number; turns: number }>();
  const errorKinds = new Map<string, number>();
  const tools = new Map<string, [number, number]>();
  const labelNames = new Set<string>();
  const totals = { sessions: 0, turns: 0, finished: 0, failed: 0, cancelled: 0, costUsd: 0 };
  for (const facts of sessions) {
    if (!tenantMatches(facts, query.tenant)) continue;
    let counted = false;
    for (const turn of facts.turns) {
      if (turn.atMs === null || turn.atMs < fromMs || turn.atMs >= toMs) continue;
      counted = true;
      totals.turns++;
      totals.costUsd += turn.costUsd;
      for (const name of Object.keys(turn.labels)) labelNames.add(name);
      const group = groupOf(by, facts, turn);
      const sum = cost.get(group) ?? { costUsd: 0, turns: 0 };
      cost.set(group, { costUsd: sum.costUsd + turn.costUsd, turns: sum.turns + 1 });
      for (const [name, [calls, errors]] of Object.entries(turn.tools)) {
        const toolSum = tools.get(name) ?? [0, 0];
        tools.set(name, [toolSum[0] + calls, toolSum[1] + errors]);
      }
      if (turn.endedMs === null) continue;
      const outcome = turn.status as (typeof ENDED)[number];
      const bucket = Math.floor((turn.endedMs - firstMs) / stepMs);
      counts[bucket]![outcome]++;
      totals[outcome]++;
      if (turn.startedMs !== null) durations[bucket]!.push(Math.max(0, turn.endedMs - turn.startedMs));
      if (turn.errorKind !== null) errorKinds.set(turn.errorKind, (errorKinds.get(turn.errorKind) ?? 0) + 1);
    }
    if (counted) totals.sessions++;
  }
  const all = sortedNumbers(durations.flat());
  return {
    fromMs,
    toMs,
    stepMs,
    by,
    groupings: ["tenant", ...[...labelNames].sort().map((name) => `label:${name}`)],
    buckets: counts.map((bucket, index) => {
      const sorted = sortedNumbers(durations[index]!);
      return { atMs: firstMs + index * stepMs, ...bucket, p50Ms: quantile(sorted, 0.5), p95Ms: quantile(sorted, 0.95) };
    }),
    totals: { ...totals, p50Ms: quantile(all, 0.5), p95Ms: quantile(all, 0.95) },
    cost: topWithOther(
      [...cost].map(([key, sum]) => ({ key, ...sum })),
      (entry) => entry.costUsd,
      (rest) => ({
        key: `(${rest.length} others)`,
        costUsd: rest.reduce((sum, entry) => sum + entry.costUsd, 0),
        turns: rest.reduce((sum, entry) => sum + entry.turns, 0),
      }),
    ),
    errorKinds: [...errorKinds].map(([kind, turns]) => ({ kind, turns })).sort((a, b) => b.turns - a.turns),
    tools: [...tools]
      .map(([name, [calls, errors]]) => ({ name, calls, errors, rate: calls === 0 ? 0 : errors / calls }))
      .sort((a, b) => b.calls - a.calls || a.name.localeCompare(b.name))
      .slice(0, TOP),
  };
}
