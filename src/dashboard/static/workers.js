// Workers: each worker whose heartbeat is alive (its host and pid, slots busy of total as a bar, warm
// processes kept, version, last beat) with the turns it runs now; then the turns whose worker is gone
// (their job is active, their attempt's worker no longer beats) and those the log says run but no
// active job holds. Read every few seconds while the view is open (GET /api/workers).
import { ago, count, element, table } from "./dom.js";
import { store } from "./app.js";
import { svg } from "./svg.js";

const EVERY_MS = 3000;

const sessionLink = (run) =>
  element(
    "a",
    { href: `#/session/${encodeURIComponent(run.session)}/turn/${encodeURIComponent(run.turn)}` },
    `${run.session} · ${run.turn}`,
  );

/** Slots busy of total as a small bar (data-busy, data-total for tests). */
function slotsBar(worker) {
  const width = 100;
  const filled = worker.slotsTotal > 0 ? (worker.slotsBusy / worker.slotsTotal) * width : 0;
  return svg(
    "svg",
    {
      class: "slots",
      width,
      height: 10,
      viewBox: `0 0 ${width} 10`,
      "data-busy": worker.slotsBusy,
      "data-total": worker.slotsTotal,
    },
    svg("rect", { class: "free", x: 0, y: 0, width, height: 10 }),
    svg("rect", { class: "busy", x: 0, y: 0, width: filled.toFixed(2), height: 10 }),
  );
}

function workerRow(worker) {
  return element(
    "tr",
    { "data-worker": worker.worker, "data-draining": worker.draining ? "1" : "0" },
    element(
      "td",
      { class: "id" },
      worker.worker,
      worker.draining ? element("span", { class: "badge" }, " draining") : null,
      worker.id !== worker.worker ? element("div", { class: "muted" }, worker.id) : null,
    ),
    element("td", {}, `${worker.host} · pid ${worker.pid}`),
    element("td", { class: "num" }, slotsBar(worker), ` ${worker.slotsBusy}/${worker.slotsTotal}`),
    element("td", { class: "num" }, String(worker.warmKept)),
    element("td", {}, worker.version),
    element("td", { title: worker.startedAt }, ago(worker.startedAt)),
    element("td", { title: worker.beatAt }, `${(worker.heartbeatAgeMs / 1000).toFixed(1)} s ago`),
    element(
      "td",
      { class: "runs" },
      worker.runs.length === 0
        ? element("span", { class: "muted" }, "idle")
        : worker.runs.map((run) => element("div", {}, sessionLink(run))),
    ),
  );
}

function runsTable(id, runs, empty) {
  const rows = runs.map((run) =>
    element(
      "tr",
      { "data-session": run.session, "data-turn": run.turn },
      element("td", { class: "id" }, sessionLink(run)),
      element("td", { class: "num" }, String(run.attempt)),
      element("td", { class: "id" }, run.worker ?? "–"),
      element("td", { title: run.startedAt ?? "" }, ago(run.startedAt)),
    ),
  );
  return table({ id }, ["Turn", "Attempt", "Worker", "Since"], rows, empty);
}

/** Sessions the fleet stream lists as running that no active job holds: nobody is running them. */
function unheld(view) {
  const held = new Set(
    [...view.workers.flatMap((w) => w.runs), ...view.orphaned, ...view.starting].map((r) => r.session),
  );
  return [...store.rows.values()].filter((row) => row.status === "running" && !held.has(row.session));
}

export function workersView(root) {
  const box = element("div", { id: "workers" }, element("p", { class: "empty" }, "loading…"));
  root.append(box);
  let view = null;
  let timer = null;
  let stopped = false;

  function render() {
    if (!view) return;
    const idle = view.queue ? unheld(view) : [];
    // Parts that may be absent are null; replaceChildren takes nodes only, so the list is flattened first.
    const parts = [
      table(
        { id: "worker-table" },
        ["Worker", "Host", "Slots", "Warm", "Version", "Started", "Last beat", "Running now"],
        view.workers.map(workerRow),
        "no worker heartbeats under this prefix",
      ),
      element(
        "p",
        { class: "muted" },
        "A worker that is shutting down is marked draining: it takes no new turn and stays listed, with its turns, until they end.",
      ),
      element("h2", {}, `Turns whose worker is gone (${view.orphaned.length})`),
      runsTable("orphaned", view.orphaned, "none: every running turn's worker beats"),
      view.starting.length > 0
        ? [element("h2", {}, `Starting (${view.starting.length})`), runsTable("starting", view.starting, "")]
        : null,
      idle.length > 0
        ? [
            element("h2", {}, `Running in the log, held by no active job (${count(idle.length, "session")})`),
            element(
              "ul",
              { id: "unheld" },
              idle.map((row) =>
                element("li", {}, element("a", { href: `#/session/${encodeURIComponent(row.session)}` }, row.session)),
              ),
            ),
          ]
        : null,
      view.queue ? null : element("p", { class: "muted" }, "no queue configured: running turns are not shown"),
    ];
    box.replaceChildren(...parts.flat().filter(Boolean));
  }

  async function load() {
    try {
      const res = await fetch("/api/workers");
      if (res.ok) {
        view = await res.json();
        render();
      }
    } finally {
      if (!stopped) timer = setTimeout(load, EVERY_MS);
    }
  }
  void load();
  return {
    update: (name) => (name === "sessions" || name === "row" ? render() : undefined),
    unmount: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
