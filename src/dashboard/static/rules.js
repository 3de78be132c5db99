// Rules: the fleet's trust rules as `turnstream rules list` shows them (id, effect, pattern, who added
// it and when, the decision that added it, and whether it verifies against the dashboard's operator
// keys). With an operator key each rule can be revoked, with a reason, as `turnstream rules revoke`
// does; the server records who. A pattern comes from a tool call (from the agent): like every text
// here it is set as text only. Read every few seconds while the view is open (GET /api/rules). Under
// the rules, the recently revoked ones (`turnstream rules list --revoked`): who revoked each, when and
// why, whether the revocation's record verifies, and a link to that record in its session.
import { element, table as dataTable } from "./dom.js";
import { post, store } from "./app.js";

const EVERY_MS = 5000;

function effectBadge(rule) {
  return element("span", { class: `badge ${rule.effect === "deny" ? "s-failed" : "s-finished"}` }, rule.effect);
}

function sourceCell(rule) {
  const source = rule.source;
  if (!source) return element("td", { class: "muted" }, "no decision (added by hand)");
  const session = source.linkable
    ? element("a", { href: `#/session/${encodeURIComponent(source.session)}` }, source.session)
    : source.session;
  return element("td", { class: "id" }, session, element("div", { class: "muted" }, `request ${source.requestId}`));
}

/** Whether `item` (a rule, or a revocation's record) verifies; `unverified` says what follows when not. */
function signatureCell(item, unverified) {
  if (item.verified === true)
    return element("td", {}, element("span", { class: "badge s-finished" }, "verified"), ` ${item.keyId}`);
  if (item.verified === null)
    return element(
      "td",
      { title: "the dashboard was started without TURNSTREAM_OPERATOR_KEYS" },
      element("span", { class: "badge" }, "unchecked"),
      ` ${item.keyId ?? "not signed"}`,
    );
  return element(
    "td",
    { class: "error" },
    element("span", { class: "badge s-failed" }, "does not verify"),
    ` ${item.why}; ${unverified}`,
  );
}

/** The Revoke button, then a reason and a confirmation, in the row's last cell. */
function revokeCell(rule, revoke) {
  const cell = element("td", { class: "revoke" });
  const ask = () => {
    const reason = element("input", { type: "text", "aria-label": "reason", placeholder: "why (recorded)", size: 24 });
    const confirm = element(
      "button",
      {
        class: "deny",
        async onclick() {
          confirm.disabled = true;
          await revoke(rule, reason.value);
          cell.replaceChildren(start);
        },
      },
      "Revoke rule",
    );
    const cancel = element("button", { onclick: () => cell.replaceChildren(start) }, "Cancel");
    cell.replaceChildren(reason, confirm, cancel);
    reason.focus();
  };
  const start = element("button", { class: "deny", onclick: ask }, "Revoke");
  cell.append(start);
  return cell;
}

function actionsCell(rule, canRevoke, revoke) {
  if (!canRevoke) return element("td");
  if (!rule.revocable)
    return element("td", { class: "muted" }, "not an id the console makes: use turnstream rules revoke");
  return revokeCell(rule, revoke);
}

function ruleRow(rule, canRevoke, revoke) {
  return element(
    "tr",
    { "data-rule": rule.id, "data-effect": rule.effect, "data-verified": String(rule.verified) },
    element("td", { class: "id" }, rule.id),
    element("td", {}, effectBadge(rule)),
    element("td", { class: "pattern" }, element("code", {}, rule.pattern)),
    element(
      "td",
      { title: rule.at },
      `${rule.by}, ${rule.at}`,
      rule.reason ? element("div", { class: "muted" }, rule.reason) : null,
    ),
    sourceCell(rule),
    signatureCell(rule, "workers ignore it"),
    actionsCell(rule, canRevoke, revoke),
  );
}

/** Where the revocation is recorded: its session (linking the record when the console opens it) and event. */
function recordCell(row) {
  const href = `#/session/${encodeURIComponent(row.session)}/at/${row.seq}`;
  const session = row.linkable ? element("a", { href }, row.session) : row.session;
  return element("td", { class: "id" }, session, element("div", { class: "muted" }, `event ${row.seq}`));
}

function revokedRow(row) {
  return element(
    "tr",
    { "data-revoked": row.ruleId, "data-verified": String(row.verified) },
    element("td", { class: "id" }, row.ruleId),
    element("td", {}, effectBadge(row)),
    element("td", { class: "pattern" }, element("code", {}, row.pattern)),
    element("td", {}, row.addedBy),
    element(
      "td",
      { title: row.revokedAt },
      `${row.revokedBy}, ${row.revokedAt}`,
      row.reason ? element("div", { class: "muted" }, row.reason) : null,
    ),
    signatureCell(row, "who revoked it is not proven"),
    recordCell(row),
  );
}

/** The recently revoked rules, and how many entries of their index are no revocation. */
function revokedTable(answer) {
  const head = ["Rule", "Effect", "Pattern", "Added by", "Revoked", "Signature", "Recorded"];
  const rows = answer.revoked.map(revokedRow);
  const unreadable = answer.unreadableRevoked
    ? element(
        "p",
        { class: "muted", id: "revoked-unreadable" },
        `${answer.unreadableRevoked} entries of the index are not revocations: not shown`,
      )
    : null;
  return [dataTable({ id: "revoked-table" }, head, rows, "no recent revocations"), unreadable];
}

/** What the note says after a revocation: what, who, and where the record is (a link to that event). */
function revokedNote(done) {
  const gone = done.removed ? "revoked" : "was gone already (revoked meanwhile); recorded";
  const signed = done.keyId ? `signed with ${done.keyId}` : "unsigned";
  return [
    `${done.id} ${done.effect} ${done.pattern}: ${gone} by ${done.by} (${signed}); `,
    element(
      "a",
      { href: `#/session/${encodeURIComponent(done.session)}/at/${done.seq}` },
      `rule.revoked at event ${done.seq} of ${done.session}`,
    ),
  ];
}

export function rulesView(root) {
  const note = element("p", { class: "muted", role: "status", id: "rules-note" });
  const table = element("div", {}, element("p", { class: "empty" }, "loading…"));
  const revoked = element("div");
  const about = element(
    "p",
    { class: "muted" },
    "Workers honour only rules that verify against their TURNSTREAM_OPERATOR_KEYS. A revoked rule leaves this list; ",
    "its revocation is recorded (rule.revoked) in the log of the session whose decision added it.",
  );
  const revokedHead = element("h2", {}, "Recently revoked");
  root.append(element("div", { id: "rules" }, note, table, about, revokedHead, revoked));
  let answer = null;
  let timer = null;
  let stopped = false;

  async function revoke(rule, reason) {
    note.textContent = "…";
    try {
      const done = await post("/api/rules/revoke", { id: rule.id, reason: reason || undefined });
      note.replaceChildren(...revokedNote(done));
    } catch (err) {
      note.textContent = `refused: ${err.message}`;
    }
    await load();
  }

  function render() {
    const canRevoke = Boolean(store.hello?.canDecide);
    if (!canRevoke && store.hello && note.textContent === "")
      note.textContent = "read-only: start the dashboard with TURNSTREAM_OPERATOR_KEY to revoke rules";
    if (!answer) return;
    // A row whose reason field is open is kept as it is, so what an operator types survives the redraw.
    const open = new Map(
      [...table.querySelectorAll("tr[data-rule]")]
        .filter((row) => row.querySelector("input"))
        .map((row) => [row.dataset.rule, row]),
    );
    const head = ["Rule", "Effect", "Pattern", "Added", "From", "Signature", ""];
    const rows = answer.rules.map((rule) => open.get(rule.id) ?? ruleRow(rule, canRevoke, revoke));
    table.replaceChildren(dataTable({ id: "rule-table" }, head, rows, "no trust rules"));
    revoked.replaceChildren(...revokedTable(answer).filter(Boolean));
  }

  async function load() {
    try {
      const res = await fetch("/api/rules");
      if (res.ok) {
        answer = await res.json();
        render();
      }
    } finally {
      // A revocation loads at once, maybe while a timed load runs: one timer stays.
      clearTimeout(timer);
      if (!stopped) timer = setTimeout(load, EVERY_MS);
    }
  }
  void load();
  return {
    update: (name) => (name === "hello" ? render() : undefined),
    unmount: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
