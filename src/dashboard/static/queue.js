// The queue: counts and the waiting, active, delayed and failed turns with their sessions; above
// them, the model credentials every worker's gateway is holding requests for (cooldowns).
import { ago, badge, element } from "./dom.js";
import { store } from "./app.js";

/** "12s left", or once the cooldown's time is up, what decides its end. */
function left(cooldown) {
  const ms = Date.parse(cooldown.until) - Date.now();
  if (ms > 0) return `${Math.ceil(ms / 1000)}s left`;
  return cooldown.probing ? "ended: one probe out" : "ended: the next request probes";
}

function cooldownsTable() {
  const cooldowns = store.cooldowns;
  if (cooldowns.length === 0) return element("p", { class: "muted" }, "model cooldowns: none");
  return element(
    "table",
    { id: "cooldowns" },
    element(
      "caption",
      {},
      "Model cooldowns: every worker's gateway holds these credentials' requests, then lets one probe through",
    ),
    element(
      "thead",
      {},
      element(
        "tr",
        {},
        ["Credential", "Status", "Until", "Left", "Strike", "Probes", "Since"].map((x) => element("th", {}, x)),
      ),
    ),
    element(
      "tbody",
      {},
      cooldowns.map((cooldown) =>
        element(
          "tr",
          {},
          element("td", { class: "id" }, cooldown.fingerprint),
          element("td", { class: "num" }, cooldown.status),
          element("td", { title: cooldown.until }, new Date(cooldown.until).toLocaleTimeString()),
          element("td", {}, left(cooldown)),
          element("td", { class: "num" }, cooldown.strikes),
          element("td", { class: "num" }, cooldown.probes),
          element("td", { title: cooldown.since }, ago(cooldown.since)),
        ),
      ),
    ),
  );
}

export function queueView(root) {
  const box = element("div");
  root.append(box);
  // While a cooldown is shown, its time left counts down.
  const ticker = setInterval(() => store.cooldowns.length > 0 && render(), 1000);
  function render() {
    const queue = store.queue;
    if (!queue) return box.replaceChildren(element("p", { class: "empty" }, "connecting…"));
    if (!queue.available)
      return box.replaceChildren(cooldownsTable(), element("p", { class: "empty" }, "no queue configured"));
    const counts = queue.counts;
    box.replaceChildren(
      cooldownsTable(),
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
  return {
    update: (name) => (name === "queue" || name === "cooldowns") && render(),
    unmount: () => clearInterval(ticker),
  };
}
