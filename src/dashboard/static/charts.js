// Fleet charts over a window (1 h, 24 h, 7 d, or a from–to): turns by outcome over time, p50/p95 turn
// duration, cost by tenant or by a label, failed turns by error kind, tools by failure rate. The
// server aggregates (GET /api/charts); this draws what it sends as SVG. The window and grouping live
// in the address (#/charts?window=24h&by=tenant), the tenant filter in `?tenant=` as on Sessions.
import { count, element, money } from "./dom.js";
import { barRows, clock, ms, svg, tip } from "./svg.js";

const OUTCOMES = ["finished", "failed", "cancelled"];
const WIDTH = 1100;
const HEIGHT = 180;
const LEFT = 48;
/** The y of a time chart's base line: below it, the time axis. */
const PLOT_BASE = HEIGHT - 24;

/** The chart settings the address holds. */
function settingsOf() {
  const query = new URLSearchParams(location.hash.split("?")[1] ?? "");
  return { window: query.get("window"), from: query.get("from"), to: query.get("to"), by: query.get("by") ?? "tenant" };
}

function setSettings(settings) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(settings)) if (value) query.set(name, value);
  history.replaceState(null, "", `${location.pathname}${location.search}#/charts?${query}`);
}

/** The API's query: the address's settings and the page's tenant filter. */
function apiQuery(settings) {
  const query = new URLSearchParams();
  if (settings.from && settings.to) {
    query.set("from", new Date(settings.from).toISOString());
    query.set("to", new Date(settings.to).toISOString());
  } else query.set("window", settings.window ?? "24h");
  query.set("by", settings.by);
  const tenant = new URLSearchParams(location.search).get("tenant");
  if (tenant) query.set("tenant", tenant);
  return query;
}

/** The x axis of a time chart: five bucket boundaries, the first and last kept inside the plot. */
function timeAxis(data, xOf, height) {
  const span = data.toMs - data.fromMs;
  const count = data.buckets.length;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map(
    (fraction) => data.buckets[0].atMs + Math.round(fraction * count) * data.stepMs,
  );
  const anchors = ["start", "middle", "middle", "middle", "end"];
  return svg(
    "g",
    { class: "axis" },
    ticks.map((at, index) =>
      svg("text", { x: xOf(at), y: height - 4, "text-anchor": anchors[index] }, clock(at, span)),
    ),
  );
}

/** A time chart's buckets: the width of one, and the x of a bucket's left edge by its start. */
function bucketScale(data) {
  const slot = (WIDTH - LEFT) / data.buckets.length;
  return { slot, xOf: (at) => LEFT + ((at - data.buckets[0].atMs) / data.stepMs) * slot };
}

/** A chart over time: its largest value at the top of the y axis, the base line, its marks and the time axis. */
function timeChart(id, data, topLabel, marks) {
  return svg(
    "svg",
    { id, class: "chart", width: WIDTH, height: HEIGHT, viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img" },
    svg("text", { x: LEFT - 6, y: 12, class: "axis", "text-anchor": "end" }, topLabel),
    svg("line", { x1: LEFT, x2: WIDTH, y1: PLOT_BASE, y2: PLOT_BASE, class: "base" }),
    marks,
    timeAxis(data, bucketScale(data).xOf, HEIGHT),
  );
}

/** Stacked bars: each bucket's finished, failed and cancelled turns. */
function outcomeChart(data) {
  const top = Math.max(1, ...data.buckets.map((b) => b.finished + b.failed + b.cancelled));
  const { slot, xOf } = bucketScale(data);
  const bars = data.buckets.map((bucket) => {
    let stackTop = PLOT_BASE;
    const total = bucket.finished + bucket.failed + bucket.cancelled;
    return svg(
      "g",
      { class: "bucket", "data-at": bucket.atMs, "data-total": total },
      tip(`${new Date(bucket.atMs).toISOString()}: ${OUTCOMES.map((o) => `${bucket[o]} ${o}`).join(", ")}`),
      OUTCOMES.filter((outcome) => bucket[outcome] > 0).map((outcome) => {
        const segment = (bucket[outcome] / top) * (PLOT_BASE - 8);
        stackTop -= segment;
        return svg("rect", {
          class: `seg o-${outcome}`,
          "data-outcome": outcome,
          "data-count": bucket[outcome],
          x: (xOf(bucket.atMs) + 1).toFixed(2),
          y: stackTop.toFixed(2),
          width: Math.max(1, slot - 2).toFixed(2),
          height: segment.toFixed(2),
        });
      }),
    );
  });
  return timeChart("chart-outcomes", data, String(top), bars);
}

/** p50 and p95 of the turns that ended in each bucket, as two lines with a point per bucket. */
function durationChart(data) {
  const points = (key) => data.buckets.filter((b) => b[key] !== null).map((b) => [b.atMs, b[key]]);
  const top = Math.max(1, ...data.buckets.map((b) => b.p95Ms ?? 0));
  const { slot, xOf: leftOf } = bucketScale(data);
  const xOf = (at) => leftOf(at) + slot / 2;
  const yOf = (value) => PLOT_BASE - (value / top) * (PLOT_BASE - 8);
  const series = ["p50Ms", "p95Ms"].map((key) => {
    const list = points(key);
    return svg(
      "g",
      { class: `series ${key}`, "data-series": key },
      svg("polyline", {
        points: list.map(([at, value]) => `${xOf(at).toFixed(2)},${yOf(value).toFixed(2)}`).join(" "),
      }),
      list.map(([at, value]) =>
        svg(
          "circle",
          { class: "pt", cx: xOf(at).toFixed(2), cy: yOf(value).toFixed(2), r: 3, "data-ms": value, "data-at": at },
          tip(`${key.slice(0, 3)} ${ms(value)} at ${new Date(at).toISOString()}`),
        ),
      ),
    );
  });
  return timeChart("chart-durations", data, ms(top), series);
}

function panel(title, legend, chart, empty) {
  return element(
    "section",
    { class: "panel" },
    element("h2", {}, title, legend ? element("span", { class: "legend muted" }, legend) : null),
    empty ? element("p", { class: "empty" }, empty) : chart,
  );
}

function legendOf(items) {
  return items.flatMap(([cls, text]) => [element("span", { class: `swatch ${cls}` }), ` ${text} `]);
}

function figures(data) {
  const totals = data.totals;
  return element(
    "div",
    { class: "figures", id: "chart-totals" },
    [
      ["turns", String(totals.turns)],
      ["finished", String(totals.finished)],
      ["failed", String(totals.failed)],
      ["cancelled", String(totals.cancelled)],
      ["cost", money(totals.costUsd)],
      ["p50", ms(totals.p50Ms)],
      ["p95", ms(totals.p95Ms)],
      ["sessions", String(totals.sessions)],
    ].map(([name, value]) => element("span", { "data-figure": name }, `${name} `, element("b", {}, value))),
    element("span", { class: "muted" }, `computed in ${data.tookMs} ms`),
    data.unread > 0
      ? element("span", { class: "warn" }, `${count(data.unread, "long session")} without a read model not counted`)
      : null,
    data.archivedCapped ? element("span", { class: "warn" }, "only the most recent archived sessions counted") : null,
  );
}

function charts(data) {
  const byName = data.by === "tenant" ? "tenant" : data.by.slice("label:".length);
  return [
    figures(data),
    panel(
      "Turns by outcome",
      legendOf(OUTCOMES.map((o) => [`o-${o}`, o])),
      outcomeChart(data),
      data.totals.finished + data.totals.failed + data.totals.cancelled === 0 ? "no turn ended in this window" : null,
    ),
    panel(
      "Turn duration",
      legendOf([
        ["p50Ms", "p50"],
        ["p95Ms", "p95"],
      ]),
      durationChart(data),
      data.totals.p50Ms === null ? "no turn ended in this window" : null,
    ),
    element(
      "div",
      { class: "panels" },
      panel(
        `Cost by ${byName}`,
        null,
        barRows(
          "chart-cost",
          data.cost.map((group) => ({
            key: group.key,
            value: group.costUsd,
            text: `${money(group.costUsd)} · ${count(group.turns, "turn")}`,
          })),
        ),
        data.cost.length === 0 ? "no turn in this window" : null,
      ),
      panel(
        "Failed turns by error kind",
        null,
        barRows(
          "chart-errors",
          data.errorKinds.map((e) => ({ key: e.kind, value: e.turns, text: count(e.turns, "turn"), cls: "o-failed" })),
        ),
        data.errorKinds.length === 0 ? "no turn failed in this window" : null,
      ),
      panel(
        "Tool failure rate",
        null,
        barRows(
          "chart-tools",
          data.tools.map((tool) => ({
            key: tool.name,
            value: tool.rate,
            text: `${tool.errors}/${tool.calls} failed (${Math.round(tool.rate * 100)}%)`,
            cls: "o-failed",
          })),
        ),
        data.tools.length === 0 ? "no tool call in this window" : null,
      ),
    ),
  ];
}

export function chartsView(root) {
  let settings = settingsOf();
  const windowSelect = element(
    "select",
    { "aria-label": "window", name: "window" },
    [
      ["1h", "last hour"],
      ["24h", "last 24 hours"],
      ["7d", "last 7 days"],
      ["custom", "from – to"],
    ].map(([value, text]) => element("option", { value }, text)),
  );
  const from = element("input", { type: "datetime-local", "aria-label": "from", name: "from" });
  const to = element("input", { type: "datetime-local", "aria-label": "to", name: "to" });
  const by = element("select", { "aria-label": "cost by", name: "by" });
  const note = element("span", { class: "muted", role: "status" });
  const body = element("div", { id: "charts" });
  root.append(element("div", { class: "toolbar" }, windowSelect, from, to, by, note), body);
  windowSelect.value = settings.from && settings.to ? "custom" : (settings.window ?? "24h");
  from.value = settings.from ?? "";
  to.value = settings.to ?? "";
  let asked = 0;

  function groupings(list) {
    by.replaceChildren(
      ...list.map((g) => element("option", { value: g }, g === "tenant" ? "cost by tenant" : `cost by ${g}`)),
    );
    by.value = list.includes(settings.by) ? settings.by : "tenant";
  }

  async function load() {
    const custom = windowSelect.value === "custom";
    from.hidden = to.hidden = !custom;
    if (custom && !(from.value && to.value)) return void (note.textContent = "choose from and to");
    settings = custom
      ? { from: from.value, to: to.value, by: settings.by }
      : { window: windowSelect.value, by: settings.by };
    setSettings(settings);
    const ticket = ++asked;
    note.textContent = "…";
    const res = await fetch(`/api/charts?${apiQuery(settings)}`);
    const data = await res.json().catch(() => ({ error: res.statusText }));
    if (ticket !== asked) return;
    if (!res.ok) return void (note.textContent = data.error ?? res.statusText);
    note.textContent = "";
    groupings(data.groupings.includes(data.by) ? data.groupings : [...data.groupings, data.by]);
    body.replaceChildren(...charts(data));
    body.dataset.rendered = String(ticket);
    // For the charts benchmark (bench/dashboard-charts.ts), and for the page to start its fleet stream.
    performance.mark("ts:charts");
    requestAnimationFrame(() => setTimeout(() => window.dispatchEvent(new Event("ts:charts"))));
  }
  windowSelect.addEventListener("change", load);
  from.addEventListener("change", load);
  to.addEventListener("change", load);
  by.addEventListener("change", () => {
    settings = { ...settings, by: by.value };
    void load();
  });
  groupings([settings.by]);
  void load();
  return { loading: true };
}
