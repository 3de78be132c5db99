// A session's turn as a waterfall (GET /api/sessions/<id>/timeline): one row per attempt, model call,
// tool call, decision wait and parked stretch, placed on the turn's own time scale. Bars end at "now"
// while what they show lasts. Each row carries its lane, status and times as data-* for tests.
import { element } from "./dom.js";
import { clip, clock, ms, svg, tip } from "./svg.js";

const WIDTH = 1100;
const LABEL = 300;
const ROW = 18;
const AXIS = 20;

/** The waterfall of one turn. */
function waterfall(turn, nowMs) {
  const startMs = turn.startMs ?? turn.spans[0]?.startMs ?? nowMs;
  const endOf = (span) => span.endMs ?? nowMs;
  const endMs = Math.max(turn.endMs ?? nowMs, ...turn.spans.map(endOf), startMs + 1);
  const scale = (WIDTH - LABEL - 90) / (endMs - startMs);
  const xOf = (at) => LABEL + (at - startMs) * scale;
  const height = AXIS + turn.spans.length * ROW + 4;
  const rows = turn.spans.map((span, index) => {
    const top = AXIS + index * ROW;
    const barWidth = Math.max(1, (endOf(span) - span.startMs) * scale);
    const took = span.endMs === null ? `${ms(nowMs - span.startMs)} so far` : ms(span.endMs - span.startMs);
    return svg(
      "g",
      {
        class: `span lane-${span.lane} st-${span.status}`,
        "data-lane": span.lane,
        "data-status": span.status,
        "data-start": span.startMs,
        "data-end": span.endMs ?? "",
      },
      tip(`${span.label}: ${took}${span.detail ? ` · ${span.detail}` : ""}`),
      svg("text", { x: span.lane === "attempt" ? 4 : 16, y: top + ROW * 0.72, class: "label" }, clip(span.label, 40)),
      svg("rect", {
        class: "bar",
        x: xOf(span.startMs).toFixed(2),
        y: top + 3,
        width: barWidth.toFixed(2),
        height: ROW - 6,
      }),
      span.ttfbMs !== null
        ? svg("line", {
            class: "ttfb",
            x1: xOf(span.startMs + span.ttfbMs).toFixed(2),
            x2: xOf(span.startMs + span.ttfbMs).toFixed(2),
            y1: top + 2,
            y2: top + ROW - 2,
          })
        : null,
      svg("text", { x: (xOf(span.startMs) + barWidth + 4).toFixed(2), y: top + ROW * 0.72, class: "figure" }, took),
    );
  });
  const ticks = [0, 0.5, 1].map((f) => startMs + f * (endMs - startMs));
  return svg(
    "svg",
    {
      class: "chart waterfall",
      width: WIDTH,
      height,
      viewBox: `0 0 ${WIDTH} ${height}`,
      role: "img",
      "data-turn": turn.turn,
      "data-start": startMs,
      "data-end": endMs,
    },
    svg(
      "g",
      { class: "axis" },
      ticks.map((at, index) =>
        svg(
          "text",
          { x: xOf(at), y: 12, "text-anchor": ["start", "middle", "end"][index] },
          `${clock(at, 0)} (+${ms(at - startMs)})`,
        ),
      ),
    ),
    rows,
  );
}

/**
 * The timeline panel of a session page: a turn picker and that turn's waterfall. `refresh()` fetches
 * again (the page calls it, spaced out, as events arrive); `show(turn)` picks a turn.
 */
export function timelinePanel(sessionId) {
  const picker = element("select", { "aria-label": "turn shown in the timeline" });
  const note = element("span", { class: "muted" });
  const box = element("div", { class: "waterfall-box" });
  const panel = element(
    "details",
    { class: "timeline", id: "timeline" },
    element("summary", {}, "Timeline ", picker, " ", note),
    box,
  );
  let data = null;
  let chosen = null;
  let inFlight = false;
  let again = false;

  function draw() {
    if (!data) return;
    if (data.turns.length === 0) return box.replaceChildren(element("p", { class: "empty" }, "no turns"));
    const ids = data.turns.map((t) => t.turn);
    if (picker.options.length !== ids.length || [...picker.options].some((o, i) => o.value !== ids[i]))
      picker.replaceChildren(
        ...data.turns.map((t, i) => element("option", { value: t.turn }, `turn ${i + 1} · ${t.turn} · ${t.status}`)),
      );
    if (!ids.includes(chosen)) chosen = ids.at(-1);
    picker.value = chosen;
    const turn = data.turns.find((t) => t.turn === chosen);
    note.textContent = turn.dropped > 0 ? `${turn.dropped} later calls not drawn` : "";
    box.replaceChildren(waterfall(turn, data.nowMs));
  }

  async function refresh() {
    if (inFlight) return void (again = true);
    inFlight = true;
    try {
      const res = await fetch(`/api/sessions/${encodeURIComponent(sessionId)}/timeline`);
      if (res.ok) {
        data = await res.json();
        draw();
      } else note.textContent = `timeline: ${res.statusText}`;
    } finally {
      inFlight = false;
    }
    if (again) {
      again = false;
      void refresh();
    }
  }

  picker.addEventListener("change", () => {
    chosen = picker.value;
    draw();
  });
  panel.addEventListener("toggle", () => panel.open && void refresh());
  return {
    panel,
    /** Fetched only while open: a closed panel costs the server nothing. */
    refresh: () => (panel.open ? refresh() : undefined),
    open() {
      panel.open = true;
    },
    show(turn) {
      chosen = turn;
      draw();
    },
  };
}
