// The queue: counts and the waiting, active, delayed and failed turns with their sessions.
import { ago, badge, h } from "./dom.js";
import { store } from "./app.js";

export function queueView(root) {
  const box = h("div");
  root.append(box);
  function render() {
    const queue = store.queue;
    if (!queue) return box.replaceChildren(h("p", { class: "empty" }, "connecting…"));
    if (!queue.available) return box.replaceChildren(h("p", { class: "empty" }, "no queue configured"));
    const counts = queue.counts;
    box.replaceChildren(
      h(
        "div",
        { class: "figures toolbar" },
        ["waiting", "active", "delayed", "prioritized", "failed", "completed"].map((k) =>
          h("span", {}, `${k} `, h("b", {}, String(counts[k] ?? 0))),
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
          queue.jobs.length === 0
            ? h("tr", {}, h("td", { colspan: 6, class: "empty" }, "nothing waiting, running or failed"))
            : queue.jobs.map((job) =>
                h(
                  "tr",
                  {},
                  h("td", {}, badge(job.state)),
                  h("td", { class: "id" }, job.turn),
                  h(
                    "td",
                    { class: "id" },
                    h("a", { href: `#/session/${encodeURIComponent(job.session)}` }, job.session),
                  ),
                  h("td", { class: "num" }, job.attempt),
                  h("td", { title: job.at ?? "" }, ago(job.at)),
                  h("td", { class: job.failedReason ? "error" : "muted" }, job.failedReason ?? ""),
                ),
              ),
        ),
      ),
    );
  }
  render();
  return { update: (name) => name === "queue" && render() };
}
