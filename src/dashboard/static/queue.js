// The queue: counts and the waiting, active, delayed and failed turns with their sessions.
import { ago, badge, h } from "./dom.js";
import { store } from "./app.js";

export function queueView(root) {
  const box = h("div");
  root.append(box);
  function render() {
    const q = store.queue;
    if (!q) return box.replaceChildren(h("p", { class: "empty" }, "connecting…"));
    if (!q.available) return box.replaceChildren(h("p", { class: "empty" }, "no queue configured"));
    const c = q.counts;
    box.replaceChildren(
      h(
        "div",
        { class: "figures toolbar" },
        ["waiting", "active", "delayed", "prioritized", "failed", "completed"].map((k) =>
          h("span", {}, `${k} `, h("b", {}, String(c[k] ?? 0))),
        ),
      ),
      h(
        "table",
        { id: "queue" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["State", "Turn", "Session", "Attempt", "Since", "Reason"].map((x) => h("th", {}, x)),
          ),
        ),
        h(
          "tbody",
          {},
          q.jobs.length === 0
            ? h("tr", {}, h("td", { colspan: 6, class: "empty" }, "nothing waiting, running or failed"))
            : q.jobs.map((j) =>
                h(
                  "tr",
                  {},
                  h("td", {}, badge(j.state)),
                  h("td", { class: "id" }, j.turn),
                  h("td", { class: "id" }, h("a", { href: `#/session/${encodeURIComponent(j.session)}` }, j.session)),
                  h("td", { class: "num" }, j.attempt),
                  h("td", { title: j.at ?? "" }, ago(j.at)),
                  h("td", { class: j.failedReason ? "error" : "muted" }, j.failedReason ?? ""),
                ),
              ),
        ),
      ),
    );
  }
  render();
  return { update: (name) => name === "queue" && render() };
}
