// Decisions inbox: requests waiting for an operator across the fleet, with the tool, its input and
// the session's context; Allow, Deny, Always allow. Abandoned requests are marked and cannot be decided.
import { h } from "./dom.js";
import { post, store } from "./app.js";

function left(expiresAt) {
  const s = Math.round((Date.parse(expiresAt) - Date.now()) / 1000);
  return s > 0 ? `${s}s left` : "expired";
}

function card(p, notes) {
  const key = `${p.session}/${p.requestId}`;
  const reason = h("input", {
    type: "text",
    placeholder: "reason (optional, shown to the agent)",
    "aria-label": "reason",
  });
  const redactedOk = p.redacted ? h("input", { type: "checkbox", "aria-label": "allow although redacted" }) : null;
  const note = h("span", { class: "muted", role: "status" }, notes.get(key) ?? "");
  const canDecide = store.hello?.canDecide && p.status === "pending";
  const act = (decision, always) => async () => {
    for (const b of buttons) b.disabled = true;
    note.textContent = "…";
    try {
      const r = await post("/api/decide", {
        session: p.session,
        requestId: p.requestId,
        decision,
        always,
        reason: reason.value || undefined,
        allowRedacted: redactedOk?.checked || undefined,
      });
      notes.set(
        key,
        r.applied
          ? `${r.decision} recorded by ${r.by}${r.rule ? `; rule ${r.rule} added` : ""}`
          : `already decided: ${r.decision} by ${r.by}`,
      );
    } catch (err) {
      notes.set(key, `refused: ${err.message}`);
      for (const b of buttons) b.disabled = false;
    }
    note.textContent = notes.get(key);
  };
  const buttons = [
    h("button", { class: "allow", onclick: act("allow", false), disabled: !canDecide }, "Allow"),
    h("button", { class: "deny", onclick: act("deny", false), disabled: !canDecide }, "Deny"),
    h(
      "button",
      {
        onclick: act("allow", true),
        disabled: !canDecide,
        title: "allow, and add a rule allowing exactly this call from now on",
      },
      "Always allow",
    ),
  ];
  const ctx = p.context;
  return h(
    "div",
    { class: `card pending-card ${p.status}`, "data-request": p.requestId, "data-status": p.status },
    h(
      "h3",
      {},
      h("b", {}, p.tool),
      " ",
      h("span", { class: "badge" }, p.riskClass),
      " ",
      p.status === "abandoned"
        ? h("span", { class: "badge s-abandoned" }, "abandoned — the worker or attempt is gone; a retry asks again")
        : h("span", { class: "muted", "data-expires": p.expiresAt }, left(p.expiresAt)),
    ),
    h(
      "div",
      { class: "muted" },
      "session ",
      h("a", { href: `#/session/${encodeURIComponent(p.session)}` }, p.session),
      ` · turn ${p.turn} · attempt ${p.attempt} · request ${p.requestId}`,
    ),
    p.redacted
      ? h("p", { class: "warn" }, `contains redacted text (${p.redacted.join(", ")}): the exact input is not shown`)
      : null,
    // The command apart from the model's description of it: the description is a claim, the command is what runs.
    p.command !== undefined
      ? h(
          "div",
          {},
          h("div", { class: "muted" }, "command"),
          h("pre", { class: "input command" }, p.command),
          p.description !== undefined
            ? h("div", { class: "muted description" }, "model's description (a claim, not what runs): ", p.description)
            : null,
        )
      : h("pre", { class: "input" }, p.input),
    ctx
      ? h(
          "details",
          { open: true },
          h("summary", { class: "muted" }, "context"),
          ctx.prompt ? h("div", { class: "prompt" }, ctx.prompt) : null,
          ctx.recent.map((l) => h("div", { class: "muted" }, l)),
        )
      : null,
    h(
      "div",
      { class: "actions" },
      reason,
      redactedOk ? h("label", {}, redactedOk, " allow although redacted") : null,
      ...buttons,
      note,
    ),
  );
}

export function inboxView(root) {
  const notes = new Map();
  const box = h("div", { id: "inbox" });
  root.append(box);
  function render() {
    const list = store.pending;
    const decided = h(
      "div",
      { class: "muted", id: "decided" },
      [...notes].map(([k, v]) => h("div", {}, `${k}: ${v}`)),
    );
    if (list.length === 0)
      return box.replaceChildren(
        h("p", { class: "empty" }, store.hello ? "no decisions waiting" : "connecting…"),
        decided,
      );
    // Keep what an operator is typing: only redraw cards whose request changed state.
    const old = new Map([...box.querySelectorAll("[data-request]")].map((el) => [el.dataset.request, el]));
    box.replaceChildren(
      ...list.map((p) => {
        const el = old.get(p.requestId);
        return el && el.dataset.status === p.status ? el : card(p, notes);
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
