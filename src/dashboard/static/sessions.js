// Sessions: every session with status, turns, cost, tokens, last activity, last error and pending
// decisions; filter by status, search by id; live. j/k move, Enter opens.
import { ago, badge, h, money, tokens } from "./dom.js";
import { store } from "./app.js";

const STATUSES = ["all", "running", "queued", "finished", "failed", "cancelled", "new"];

export function sessionsView(root) {
  let selected = 0;
  const search = h("input", {
    type: "search",
    placeholder: "search by id  ( / )",
    "aria-label": "search sessions by id",
  });
  const status = h(
    "select",
    { "aria-label": "filter by status" },
    STATUSES.map((s) => h("option", { value: s }, s)),
  );
  const count = h("span", { class: "muted" });
  const body = h("tbody");
  const table = h(
    "table",
    { id: "sessions" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Session", "Status", "Turns", "Cost", "Tokens", "Last activity", "Last error", "Pending", "Events"].map((c) =>
          h("th", {}, c),
        ),
      ),
    ),
    body,
  );
  root.append(h("div", { class: "toolbar" }, search, status, count), table);

  const rows = () =>
    [...store.rows.values()]
      .filter((r) => status.value === "all" || r.status === status.value)
      .filter((r) => search.value === "" || r.session.toLowerCase().includes(search.value.toLowerCase()))
      .sort(
        (a, b) =>
          String(b.lastActivity ?? "").localeCompare(String(a.lastActivity ?? "")) ||
          a.session.localeCompare(b.session),
      );

  function render() {
    const list = rows();
    selected = Math.min(selected, Math.max(0, list.length - 1));
    count.textContent = `${list.length} of ${store.rows.size} sessions`;
    body.replaceChildren(
      ...list.map((r, i) =>
        h(
          "tr",
          { class: i === selected ? "sel" : "", "data-session": r.session },
          h("td", { class: "id" }, h("a", { href: `#/session/${encodeURIComponent(r.session)}` }, r.session)),
          h("td", {}, badge(r.status)),
          h("td", { class: "num" }, r.turns ?? "–"),
          h("td", { class: "num" }, money(r.costUsd)),
          h("td", { class: "num" }, tokens(r.tokens)),
          h("td", { title: r.lastActivity ?? "" }, ago(r.lastActivity)),
          h("td", { class: r.lastErrorKind ? "error" : "muted" }, r.lastErrorKind ?? "–"),
          h(
            "td",
            { class: "num" },
            r.pendingDecisions ? h("a", { href: "#/decisions" }, String(r.pendingDecisions)) : "–",
          ),
          h(
            "td",
            { class: "num" },
            r.projectedSeq !== null && r.projectedSeq !== r.lastSeq ? `${r.lastSeq} (${r.projectedSeq})` : r.lastSeq,
          ),
        ),
      ),
    );
    if (list.length === 0)
      body.append(
        h("tr", {}, h("td", { colspan: 9, class: "empty" }, store.hello ? "no sessions match" : "connecting…")),
      );
  }
  search.addEventListener("input", render);
  status.addEventListener("change", render);
  render();
  return {
    update: render,
    key(e) {
      const list = rows();
      if (e.key === "j" || e.key === "ArrowDown") selected = Math.min(list.length - 1, selected + 1);
      else if (e.key === "k" || e.key === "ArrowUp") selected = Math.max(0, selected - 1);
      else if (e.key === "Enter" && list[selected])
        location.hash = `#/session/${encodeURIComponent(list[selected].session)}`;
      else return;
      e.preventDefault();
      render();
    },
  };
}
