// otel/grafana-dashboard.json against the metrics the code exports: every series a panel queries is
// an instrument of src/metrics/names.ts under the name the Prometheus exporter gives it (histograms
// as _bucket/_sum/_count, counters with _total), every label it filters or groups by is one of that
// instrument's attributes, and every instrument is on some panel. A renamed metric fails here, not on
// an empty graph in production.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { METRICS, prometheusLabel, prometheusName, type MetricDef } from "../../src/metrics/names.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
type Obj = Record<string, any>;
const dashboard = JSON.parse(readFileSync(join(root, "otel", "grafana-dashboard.json"), "utf8")) as Obj;

/** Labels Prometheus adds to every scraped series, besides an instrument's own attributes. */
const TARGET_LABELS = new Set(["job", "instance"]);

/** Every series name the code exports, to the instrument it comes from. */
const exported = new Map<string, MetricDef>();
for (const def of Object.values(METRICS) as MetricDef[]) {
  const base = prometheusName(def);
  if (def.kind === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) exported.set(base + suffix, def);
  else exported.set(base, def);
}

const panels: Obj[] = (dashboard["panels"] as Obj[])
  .flatMap((p) => [p, ...((p["panels"] as Obj[] | undefined) ?? [])])
  .filter((p) => p["type"] !== "row");
const exprs: Array<{ panel: string; expr: string }> = panels.flatMap((p) =>
  (p["targets"] as Obj[]).map((t) => ({ panel: String(p["title"]), expr: String(t["expr"]) })),
);

const KEYWORDS = new Set([
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "bool",
  "offset",
  "and",
  "or",
  "unless",
  "inf",
  "nan",
]);

/** One selector in a PromQL expression: the series name and its label matchers. */
interface Selector {
  name: string;
  matchers: Array<{ label: string; op: string; value: string }>;
}

/** The series selectors of a PromQL expression (identifiers that are not functions, keywords or label lists). */
function selectors(expr: string): { selectors: Selector[]; grouping: string[] } {
  const grouping: string[] = [];
  // Label lists of by/without/on/ignoring are labels, not series.
  let rest = expr.replace(
    /\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g,
    (_m, _k, labels: string) => {
      grouping.push(
        ...labels
          .split(",")
          .map((l) => l.trim())
          .filter((l) => l !== ""),
      );
      return " ";
    },
  );
  rest = rest.replace(/\[[^\]]*\]/g, " ").replace(/\$\{?\w+\}?/g, " ");
  const out: Selector[] = [];
  const re = /([A-Za-z_:][A-Za-z0-9_:]*)\s*(\{[^}]*\})?(\s*\()?/g;
  for (let match = re.exec(rest); match !== null; match = re.exec(rest)) {
    const [, name, braces, call] = match;
    if (call !== undefined && braces === undefined) continue; // a function
    if (KEYWORDS.has(name!.toLowerCase())) continue;
    const matchers = [...(braces ?? "").matchAll(/([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*"([^"]*)"/g)].map(
      ([, label, op, value]) => ({ label: label!, op: op!, value: value! }),
    );
    out.push({ name: name!, matchers });
  }
  return { selectors: out, grouping };
}

test("the dashboard is a Grafana dashboard with a Prometheus datasource variable, and every panel queries it", () => {
  assert.ok(Number(dashboard["schemaVersion"]) >= 39);
  assert.equal(typeof dashboard["uid"], "string");
  const vars = dashboard["templating"]["list"] as Obj[];
  const ds = vars.find((v) => v["type"] === "datasource");
  assert.equal(ds?.["query"], "prometheus");
  const ids = new Set<number>();
  for (const panel of panels) {
    assert.ok(!ids.has(panel["id"]), `panel id ${panel["id"]} is used twice`);
    ids.add(panel["id"]);
    assert.deepEqual(
      panel["datasource"],
      { type: "prometheus", uid: `\${${ds!["name"]}}` },
      `${panel["title"]} has no datasource`,
    );
    assert.ok(Array.isArray(panel["targets"]) && panel["targets"].length > 0, `${panel["title"]} has no targets`);
    for (const target of panel["targets"] as Obj[]) {
      assert.deepEqual(target["datasource"], panel["datasource"], `${panel["title"]} ${target["refId"]}`);
      assert.ok(typeof target["expr"] === "string" && target["expr"].length > 0 && typeof target["refId"] === "string");
    }
    const gridPos = panel["gridPos"] as Obj;
    assert.ok(
      gridPos["x"] >= 0 && gridPos["x"] + gridPos["w"] <= 24 && gridPos["h"] > 0,
      `${panel["title"]} lies outside the grid`,
    );
  }
  // Every $variable an expression uses is defined (or one of Grafana's own $__ ones).
  const defined = new Set(vars.map((v) => v["name"]));
  for (const { panel, expr } of exprs) {
    for (const [, variable] of expr.matchAll(/\$\{?(\w+)\}?/g))
      assert.ok(variable!.startsWith("__") || defined.has(variable), `${panel} uses undefined $${variable}`);
  }
});

test("every series a panel queries is one the code exports, with that instrument's labels and values", () => {
  let count = 0;
  for (const { panel, expr } of exprs) {
    const { selectors: sels, grouping } = selectors(expr);
    assert.ok(sels.length > 0, `${panel}: no series in ${expr}`);
    const labelsHere = new Set<string>(TARGET_LABELS);
    for (const selector of sels) {
      count++;
      const def = exported.get(selector.name);
      assert.ok(
        def !== undefined,
        `${panel}: ${selector.name} is not a metric the code exports (${[...exported.keys()].join(", ")})`,
      );
      const attrs = def.attributes as Record<string, readonly string[] | string>;
      const own = new Map(Object.entries(attrs).map(([attribute, values]) => [prometheusLabel(attribute), values]));
      for (const label of own.keys()) labelsHere.add(label);
      if (def.kind === "histogram" && selector.name.endsWith("_bucket")) labelsHere.add("le");
      for (const matcher of selector.matchers) {
        assert.ok(
          own.has(matcher.label) || TARGET_LABELS.has(matcher.label),
          `${panel}: ${selector.name} has no label ${matcher.label}`,
        );
        const allowed = own.get(matcher.label);
        if (matcher.op === "=" && Array.isArray(allowed))
          assert.ok(allowed.includes(matcher.value), `${panel}: ${matcher.label}="${matcher.value}" never occurs`);
      }
    }
    for (const label of grouping)
      assert.ok(
        labelsHere.has(label),
        `${panel}: groups by ${label}, which ${sels.map((s) => s.name).join(", ")} do not carry`,
      );
  }
  assert.ok(count >= Object.keys(METRICS).length);
});

test("every exported instrument is on some panel; histograms' quantiles come from their buckets", () => {
  const used = new Set(exprs.flatMap(({ expr }) => selectors(expr).selectors.map((s) => s.name)));
  for (const [key, def] of Object.entries(METRICS) as Array<[string, MetricDef]>) {
    const base = prometheusName(def);
    const names = def.kind === "histogram" ? [`${base}_bucket`, `${base}_sum`, `${base}_count`] : [base];
    assert.ok(
      names.some((n) => used.has(n)),
      `${key} (${base}) is on no panel`,
    );
  }
  for (const { panel, expr } of exprs) {
    for (const match of expr.matchAll(/histogram_quantile\(\s*([0-9.]+)\s*,(.*)/g)) {
      const quantile = Number(match[1]);
      assert.ok(quantile > 0 && quantile < 1, `${panel}: quantile ${quantile}`);
      assert.match(match[2]!, /_bucket\b/, `${panel}: histogram_quantile over something other than buckets`);
      assert.match(match[2]!, /\bby \([^)]*\ble\b/, `${panel}: histogram_quantile must keep le`);
    }
    // Fleet-wide gauges are the same number in every process: summing them multiplies by the fleet size.
    for (const selector of selectors(expr).selectors) {
      if (exported.get(selector.name)?.fleetWide === true)
        assert.match(expr, /^max\b/, `${panel}: ${selector.name} is fleet-wide; aggregate it with max`);
    }
  }
});

test("the parser finds series, functions and labels as PromQL means them", () => {
  const { selectors: series, grouping } = selectors(
    'sum by (a, b) (rate(x_total{c="d", e=~"$job"}[$__rate_interval])) / max(y) * 3600',
  );
  assert.deepEqual(
    series.map((x) => x.name),
    ["x_total", "y"],
  );
  assert.deepEqual(
    series[0]!.matchers.map((m) => m.label),
    ["c", "e"],
  );
  assert.deepEqual(grouping, ["a", "b"]);
});
