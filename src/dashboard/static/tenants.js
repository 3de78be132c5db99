// Tenants: the figures of `turnstream tenants` (each tenant's budget for any 24 hours and what it spent
// in the last 24, its running turns and their limit, its over-budget policy, whether its limits verify
// against the dashboard's operator keys, who set them and when). With an operator key the console
// sets limits (signed by the server, as `turnstream tenants set`) and clears them.
import { element, table as dataTable } from "./dom.js";
import { post, store } from "./app.js";

const usd = (amount) => `$${amount.toFixed(2)}`;

/** A limit's cell: the value, "none" when the record sets none, "default" without a record, "–" when it fails. */
function limitCell(row, value) {
  if (row.limits === "none") return "default";
  if (row.limits === "fails") return "–";
  return value ?? "none";
}

function spentCell(row) {
  if (row.budgetUsd === null) return usd(row.spentUsd);
  return `${usd(row.spentUsd)} (${row.budgetPct}%${row.overBudget ? ", over" : ""})`;
}

function limitsCell(row) {
  const who = `${row.keyId}, set by ${row.setBy} at ${row.setAt}`;
  if (row.limits === "verified")
    return element("td", { class: "limits" }, element("span", { class: "badge s-finished" }, "verified"), ` ${who}`);
  if (row.limits === "unchecked")
    return element(
      "td",
      { class: "limits", title: "the dashboard was started without TURNSTREAM_OPERATOR_KEYS" },
      element("span", { class: "badge" }, "unchecked"),
      ` ${who}`,
    );
  if (row.limits === "fails")
    return element(
      "td",
      { class: "limits error" },
      element("span", { class: "badge s-failed" }, "does not verify"),
      ` ${row.problem}; workers fail its turns (tenant_limits)`,
    );
  return element("td", { class: "limits muted" }, "none: the workers' defaults");
}

/** The set form: kept across updates, so what an operator types survives the figures changing. */
function limitsForm(note) {
  const field = (label, attrs) => element("input", { "aria-label": label, ...attrs });
  const tenant = field("tenant", { type: "text", placeholder: "tenant (e.g. acme/api)", size: 22 });
  const budget = field("budget USD per 24 hours", {
    type: "number",
    min: "0",
    step: "any",
    placeholder: "budget $/24h",
  });
  const maxRunning = field("max running", { type: "number", min: "1", step: "1", placeholder: "max running" });
  const policy = element(
    "select",
    { "aria-label": "when over budget" },
    element("option", { value: "wait" }, "over budget: wait"),
    element("option", { value: "fail" }, "over budget: fail"),
  );
  const number = (input) => (input.value === "" ? undefined : Number(input.value));
  const submit = element(
    "button",
    {
      class: "allow",
      title: "replaces the tenant's limits whole: a limit left empty is no limit",
      async onclick() {
        submit.disabled = true;
        note.textContent = "…";
        try {
          const set = await post("/api/tenants/set", {
            tenant: tenant.value,
            budgetUsd: number(budget),
            maxRunning: number(maxRunning),
            overBudget: policy.value,
          });
          note.textContent = `${set.tenant}: limits set by ${set.by}, signed with ${set.keyId}`;
        } catch (err) {
          note.textContent = `refused: ${err.message}`;
        }
        submit.disabled = false;
      },
    },
    "Sign and set",
  );
  const form = element(
    "div",
    { class: "actions toolbar", id: "tenant-form" },
    tenant,
    budget,
    maxRunning,
    policy,
    submit,
  );
  /** Fills the form from a row, to change its limits. */
  form.edit = (row) => {
    tenant.value = row.tenant;
    budget.value = row.budgetUsd ?? "";
    maxRunning.value = row.maxRunning ?? "";
    policy.value = row.overBudgetPolicy ?? "wait";
    tenant.focus();
  };
  return form;
}

export function tenantsView(root) {
  const note = element("p", { class: "muted", role: "status", id: "tenant-note" });
  const form = limitsForm(note);
  const table = element("div");
  root.append(element("div", { id: "tenants" }, form, note, table));

  async function clear(row) {
    note.textContent = "…";
    try {
      const done = await post("/api/tenants/clear", { tenant: row.tenant });
      note.textContent = done.cleared ? `${done.tenant}: limits cleared` : `${done.tenant} had no limits of its own`;
    } catch (err) {
      note.textContent = `refused: ${err.message}`;
    }
  }

  function line(row, canDecide) {
    // A name written by hand, or scrubbed on its way here, is not one the server would take back.
    const canChange = canDecide && row.nameValid && !row.tenant.includes("[REDACTED:");
    return element(
      "tr",
      { "data-tenant": row.tenant, "data-limits": row.limits },
      element(
        "td",
        { class: "id" },
        row.tenant,
        row.nameValid
          ? null
          : element("span", { class: "warn" }, " (not a valid tenant name: written to Redis by hand)"),
      ),
      element("td", { class: "num" }, limitCell(row, row.budgetUsd === null ? undefined : usd(row.budgetUsd))),
      element("td", { class: row.overBudget ? "num error" : "num" }, spentCell(row)),
      element(
        "td",
        { class: "num" },
        `${row.running}/${limitCell(row, row.maxRunning === null ? undefined : String(row.maxRunning))}`,
      ),
      element("td", {}, limitCell(row, row.overBudgetPolicy ?? undefined)),
      limitsCell(row),
      element(
        "td",
        {},
        canChange ? element("button", { onclick: () => form.edit(row) }, "Edit") : null,
        canChange && row.limits !== "none"
          ? element("button", { class: "deny", onclick: () => clear(row) }, "Clear")
          : null,
      ),
    );
  }

  function render() {
    const canChange = Boolean(store.hello?.canDecide);
    form.hidden = !canChange;
    if (!canChange && store.hello)
      note.textContent = "read-only: start the dashboard with TURNSTREAM_OPERATOR_KEY to set limits";
    const tenants = store.tenants;
    if (!tenants) return table.replaceChildren(element("p", { class: "empty" }, "connecting…"));
    const head = ["Tenant", "Budget/24h", "Spent/24h", "Running", "If over budget", "Limits", ""];
    const rows = tenants.map((row) => line(row, canChange));
    table.replaceChildren(dataTable({ id: "tenant-table" }, head, rows, "no tenant has run a turn or has limits"));
  }
  render();
  return { update: (name) => (name === "tenants" || name === "hello") && render() };
}
