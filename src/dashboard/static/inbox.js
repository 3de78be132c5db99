// Decisions inbox: requests waiting for an operator across the fleet, with the tool, its input and
// the session's context; Allow, Deny, Always allow. Parked requests (their turn waits holding nothing,
// for hours if need be) say how long they have waited and how long until their deadline denies them;
// they are decided the same way. Abandoned requests are marked and cannot be decided.
import { element } from "./dom.js";
import { post, store } from "./app.js";

/** A span of time for people: `42s`, `3m12s`, `2h05m`, `3d04h` (as the command line writes it). */
function span(ms) {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  const two = (n) => String(n).padStart(2, "0");
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m${two(seconds % 60)}s`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h${two(Math.floor(seconds / 60) % 60)}m`;
  return `${Math.floor(seconds / 86400)}d${two(Math.floor(seconds / 3600) % 24)}h`;
}

function left(expiresAt) {
  const ms = Date.parse(expiresAt) - Date.now();
  return ms > 0 ? `${span(ms)} left` : "expired";
}

/** A timing line from an element's data: `parked 3m12s · deadline <local time> (7h56m left)`, or `4m10s left`. */
function timing(data) {
  const until = left(data.expires);
  if (!data.since) return until;
  const deadline = new Date(data.expires).toLocaleString();
  return `parked ${span(Date.now() - Date.parse(data.since))} · deadline ${deadline} (${until})`;
}

function timingElement(request) {
  const data = { expires: request.expiresAt, since: request.status === "parked" ? request.requestedAt : undefined };
  return element(
    "span",
    {
      class: "muted timing",
      "data-expires": data.expires,
      "data-since": data.since,
      title: `denied unless decided by ${new Date(request.expiresAt).toLocaleString()}`,
    },
    timing(data),
  );
}

function stateOf(request) {
  if (request.status === "abandoned")
    return element(
      "span",
      { class: "badge s-abandoned" },
      "abandoned — the worker or attempt is gone; a retry asks again",
    );
  if (request.status === "parked")
    return [
      element(
        "span",
        { class: "badge s-parked", title: "the turn waits for this decision holding nothing; any worker resumes it" },
        "parked",
      ),
      " ",
      timingElement(request),
    ];
  return timingElement(request);
}

function card(request, notes) {
  const key = `${request.session}/${request.requestId}`;
  const reason = element("input", {
    type: "text",
    placeholder: "reason (optional, shown to the agent)",
    "aria-label": "reason",
  });
  const redactedOk = request.redacted
    ? element("input", { type: "checkbox", "aria-label": "allow although redacted" })
    : null;
  const note = element("span", { class: "muted", role: "status" }, notes.get(key) ?? "");
  const canDecide = store.hello?.canDecide && (request.status === "pending" || request.status === "parked");
  const act = (decision, always) => async () => {
    for (const button of buttons) button.disabled = true;
    note.textContent = "…";
    try {
      const outcome = await post("/api/decide", {
        session: request.session,
        requestId: request.requestId,
        decision,
        always,
        reason: reason.value || undefined,
        allowRedacted: redactedOk?.checked || undefined,
      });
      notes.set(
        key,
        outcome.applied
          ? `${outcome.decision} recorded by ${outcome.by}${outcome.rule ? `; rule ${outcome.rule} added` : ""}`
          : `already decided: ${outcome.decision} by ${outcome.by}`,
      );
    } catch (err) {
      notes.set(key, `refused: ${err.message}`);
      for (const button of buttons) button.disabled = false;
    }
    note.textContent = notes.get(key);
  };
  const buttons = [
    element("button", { class: "allow", onclick: act("allow", false), disabled: !canDecide }, "Allow"),
    element("button", { class: "deny", onclick: act("deny", false), disabled: !canDecide }, "Deny"),
    element(
      "button",
      {
        onclick: act("allow", true),
        disabled: !canDecide,
        title: "allow, and add a rule allowing exactly this call from now on",
      },
      "Always allow",
    ),
  ];
  const ctx = request.context;
  return element(
    "div",
    { class: `card pending-card ${request.status}`, "data-request": request.requestId, "data-status": request.status },
    element(
      "h3",
      {},
      element("b", {}, request.tool),
      " ",
      element("span", { class: "badge" }, request.riskClass),
      " ",
      stateOf(request),
    ),
    element(
      "div",
      { class: "muted" },
      "session ",
      element("a", { href: `#/session/${encodeURIComponent(request.session)}` }, request.session),
      ` · turn ${request.turn} · attempt ${request.attempt} · request ${request.requestId}`,
    ),
    request.redacted
      ? element(
          "p",
          { class: "warn" },
          `contains redacted text (${request.redacted.join(", ")}): the exact input is not shown`,
        )
      : null,
    // The command apart from the model's description of it: the description is a claim, the command is what runs.
    request.command !== undefined
      ? element(
          "div",
          {},
          element("div", { class: "muted" }, "command"),
          element("pre", { class: "input command" }, request.command),
          request.description !== undefined
            ? element(
                "div",
                { class: "muted description" },
                "model's description (a claim, not what runs): ",
                request.description,
              )
            : null,
        )
      : element("pre", { class: "input" }, request.input),
    ctx
      ? element(
          "details",
          { open: true },
          element("summary", { class: "muted" }, "context"),
          ctx.prompt ? element("div", { class: "prompt" }, ctx.prompt) : null,
          ctx.recent.map((l) => element("div", { class: "muted" }, l)),
        )
      : null,
    element(
      "div",
      { class: "actions" },
      reason,
      redactedOk ? element("label", {}, redactedOk, " allow although redacted") : null,
      ...buttons,
      note,
    ),
  );
}

export function inboxView(root) {
  const notes = new Map();
  const box = element("div", { id: "inbox" });
  root.append(box);
  function render() {
    const list = store.pending;
    const decided = element(
      "div",
      { class: "muted", id: "decided" },
      [...notes].map(([k, v]) => element("div", {}, `${k}: ${v}`)),
    );
    if (list.length === 0)
      return box.replaceChildren(
        element("p", { class: "empty" }, store.hello ? "no decisions waiting" : "connecting…"),
        decided,
      );
    // Keep what an operator is typing: only redraw cards whose request changed state.
    const old = new Map([...box.querySelectorAll("[data-request]")].map((el) => [el.dataset.request, el]));
    box.replaceChildren(
      ...list.map((request) => {
        const el = old.get(request.requestId);
        return el && el.dataset.status === request.status ? el : card(request, notes);
      }),
      decided,
    );
  }
  render();
  const tick = setInterval(() => {
    for (const el of box.querySelectorAll("[data-expires]")) el.textContent = timing(el.dataset);
  }, 1000);
  return { update: (name) => (name === "pending" || name === "hello") && render(), unmount: () => clearInterval(tick) };
}
