// Sessions: every session with status, turns, cost, tokens, last activity, last error and pending
// decisions; filter by status, search by id; live. j/k move, Enter opens. Sessions retention moved
// to the archive are listed too (the most recent), marked archived.
import { ago, badge, element, money, tokens } from "./dom.js";
import { store } from "./app.js";

const STATUSES = ["all", "running", "parked", "queued", "finished", "failed", "cancelled", "new"];

export function sessionsView(root) {
  let selected = 0;
  const search = element("input", {
    type: "search",
    placeholder: "search by id  ( / )",
    "aria-label": "search sessions by id",
  });
  const status = element(
    "select",
    { "aria-label": "filter by status" },
    STATUSES.map((s) => element("option", { value: s }, s)),
  );
  const count = element("span", { class: "muted" });
  const body = element("tbody");
  const table = element(
    "table",
    { id: "sessions" },
    element(
      "thead",
      {},
      element(
        "tr",
        {},
        ["Session", "Status", "Turns", "Cost", "Tokens", "Last activity", "Last error", "Pending", "Events"].map((c) =>
          element("th", {}, c),
        ),
      ),
    ),
    body,
  );
  root.append(element("div", { class: "toolbar" }, search, status, count), table);

  const rows = () =>
    [...store.rows.values()]
      .filter((r) => status.value === "all" || r.status === status.value)
      .filter((r) => search.value === "" || r.session.toLowerCase().includes(search.value.toLowerCase()))
      .sort(
        (left, right) =>
          String(right.lastActivity ?? "").localeCompare(String(left.lastActivity ?? "")) ||
          left.session.localeCompare(right.session),
      );

  function render() {
    const list = rows();
    selected = Math.min(selected, Math.max(0, list.length - 1));
    count.textContent = `${list.length} of ${store.rows.size} sessions`;
    body.replaceChildren(
      ...list.map((row, index) =>
        element(
          "tr",
          { class: index === selected ? "sel" : "", "data-session": row.session },
          element(
            "td",
            { class: "id" },
            element("a", { href: `#/session/${encodeURIComponent(row.session)}` }, row.session),
          ),
          element(
            "td",
            {},
            badge(row.status),
            // Retention moved it out of Redis: listed from the archive's summary, it opens from the archive.
            row.archived ? element("span", { class: "muted archived" }, " archived") : null,
          ),
          element("td", { class: "num" }, row.turns ?? "–"),
          element("td", { class: "num" }, money(row.costUsd)),
          element("td", { class: "num" }, tokens(row.tokens)),
          element("td", { title: row.lastActivity ?? "" }, ago(row.lastActivity)),
          element("td", { class: row.lastErrorKind ? "error" : "muted" }, row.lastErrorKind ?? "–"),
          element(
            "td",
            { class: "num" },
            row.pendingDecisions ? element("a", { href: "#/decisions" }, String(row.pendingDecisions)) : "–",
          ),
          element(
            "td",
            { class: "num" },
            row.projectedSeq !== null && row.projectedSeq !== row.lastSeq
              ? `${row.lastSeq} (${row.projectedSeq})`
              : row.lastSeq,
          ),
        ),
      ),
    );
    if (list.length === 0)
      body.append(
        element(
          "tr",
          {},
          element("td", { colspan: 9, class: "empty" }, store.hello ? "no sessions match" : "connecting…"),
        ),
      );
  }
  search.addEventListener("input", render);
  status.addEventListener("change", render);
  render();
  return {
    update: render,
    key(event) {
      const list = rows();
      if (event.key === "j" || event.key === "ArrowDown") selected = Math.min(list.length - 1, selected + 1);
      else if (event.key === "k" || event.key === "ArrowUp") selected = Math.max(0, selected - 1);
      else if (event.key === "Enter" && list[selected])
        location.hash = `#/session/${encodeURIComponent(list[selected].session)}`;
      else return;
      event.preventDefault();
      render();
    },
  };
}
