// Decisions inbox: requests waiting for an operator across the fleet, with the tool, its input and
// the session's context; Allow, Deny, Always allow. Abandoned requests are marked and cannot be decided.
import { element } from "./dom.js";
import { post, store } from "./app.js";

function left(expiresAt) {
  const seconds = Math.round((Date.parse(expiresAt) - Date.now()) / 1000);
  return seconds > 0 ? `${seconds}s left` : "expired";
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
  const canDecide = store.hello?.canDecide && request.status === "pending";
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
      request.status === "abandoned"
        ? element(
            "span",
            { class: "badge s-abandoned" },
            "abandoned — the worker or attempt is gone; a retry asks again",
          )
        : element("span", { class: "muted", "data-expires": request.expiresAt }, left(request.expiresAt)),
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
    for (const el of box.querySelectorAll("[data-expires]")) el.textContent = left(el.dataset.expires);
  }, 1000);
  return { update: (name) => (name === "pending" || name === "hello") && render(), unmount: () => clearInterval(tick) };
}
