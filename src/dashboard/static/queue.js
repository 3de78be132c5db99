// The queue: counts and the waiting, active, delayed and failed turns with their sessions.
import { ago, badge, element } from "./dom.js";
import { store } from "./app.js";

export function queueView(root) {
  const box = element("div");
  root.append(box);
  function render() {
    const queue = store.queue;
    if (!queue) return box.replaceChildren(element("p", { class: "empty" }, "connecting…"));
    if (!queue.available) return box.replaceChildren(element("p", { class: "empty" }, "no queue configured"));
    const counts = queue.counts;
    box.replaceChildren(
      element(
        "div",
        { class: "figures toolbar" },
        ["waiting", "active", "delayed", "prioritized", "failed", "completed"].map((k) =>
          element("span", {}, `${k} `, element("b", {}, String(counts[k] ?? 0))),
        ),
      ),
      element(
        "table",
        { id: "queue" },
        element(
          "thead",
          {},
          element(
            "tr",
            {},
            ["State", "Turn", "Session", "Attempt", "Since", "Reason"].map((x) => element("th", {}, x)),
          ),
        ),
        element(
          "tbody",
          {},
          queue.jobs.length === 0
            ? element("tr", {}, element("td", { colspan: 6, class: "empty" }, "nothing waiting, running or failed"))
            : queue.jobs.map((job) =>
                element(
                  "tr",
                  {},
                  element("td", {}, badge(job.state)),
                  element("td", { class: "id" }, job.turn),
                  element(
                    "td",
                    { class: "id" },
                    element("a", { href: `#/session/${encodeURIComponent(job.session)}` }, job.session),
                  ),
                  element("td", { class: "num" }, job.attempt),
                  element("td", { title: job.at ?? "" }, ago(job.at)),
                  element("td", { class: job.failedReason ? "error" : "muted" }, job.failedReason ?? ""),
                ),
              ),
        ),
      ),
    );
  }
  render();
  return { update: (name) => name === "queue" && render() };
}
