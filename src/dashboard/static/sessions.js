// Sessions: every session with status, tenant, turns, cost, tokens, last activity, last error and
// pending decisions; filter by status and tenant, search by id; live. j/k move, Enter opens. Sessions
// retention moved to the archive are listed too (the most recent), marked archived. The tenant filter
// is the address's `?tenant=` (`-`: sessions without one), so a filtered list can be linked to.
import { ago, badge, element, money, tokens } from "./dom.js";
import { store } from "./app.js";

const STATUSES = ["all", "running", "parked", "queued", "finished", "failed", "cancelled", "new"];
/** The tenant filter's values besides a tenant's name: every session, or those without a tenant. */
const ALL_TENANTS = "";
const NO_TENANT = "-";

/** The tenant filter the address names. */
const tenantInAddress = () => new URLSearchParams(location.search).get("tenant") ?? ALL_TENANTS;

/** Puts the tenant filter in the address (kept as the page moves between views), without a reload. */
function setTenantInAddress(tenant) {
  const query = new URLSearchParams(location.search);
  if (tenant === ALL_TENANTS) query.delete("tenant");
  else query.set("tenant", tenant);
  const search = query.toString();
  history.replaceState(null, "", `${location.pathname}${search ? `?${search}` : ""}${location.hash}`);
}

const tenantMatches = (row, tenant) =>
  tenant === ALL_TENANTS || (tenant === NO_TENANT ? !row.tenant : row.tenant === tenant);

/** The tenant filter's options: all, none, every tenant listed, and the one asked for even when none is listed. */
function tenantOptions(wanted) {
  const names = new Set([...store.rows.values()].map((row) => row.tenant).filter(Boolean));
  if (wanted !== ALL_TENANTS && wanted !== NO_TENANT) names.add(wanted);
  return [[ALL_TENANTS, "all tenants"], [NO_TENANT, "no tenant"], ...[...names].sort().map((name) => [name, name])];
}

export function sessionsView(root) {
  let selected = 0;
  const search = element("input", {
    type: "search",
    placeholder: "search by id  ( / )",
    "aria-label": "search sessions by id",
  });
  const status = element(
    "select",
    { "aria-label": "filter by status" },
    STATUSES.map((s) => element("option", { value: s }, s)),
  );
  const tenant = element("select", { "aria-label": "filter by tenant", name: "tenant" });
  let tenantChoices = "";
  /** Rebuilds the tenant options when the tenants listed changed (not on every row update). */
  function refreshTenants(wanted) {
    const options = tenantOptions(wanted);
    const key = JSON.stringify(options);
    if (key !== tenantChoices) {
      tenantChoices = key;
      tenant.replaceChildren(...options.map(([value, text]) => element("option", { value }, text)));
    }
    tenant.value = wanted;
  }
  const count = element("span", { class: "muted" });
  const body = element("tbody");
  const table = element(
    "table",
    { id: "sessions" },
    element(
      "thead",
      {},
      element(
        "tr",
        {},
        [
          "Session",
          "Status",
          "Tenant",
          "Turns",
          "Cost",
          "Tokens",
          "Last activity",
          "Last error",
          "Pending",
          "Events",
        ].map((c) => element("th", {}, c)),
      ),
    ),
    body,
  );
  root.append(element("div", { class: "toolbar" }, search, status, tenant, count), table);

  const rows = () =>
    [...store.rows.values()]
      .filter((r) => status.value === "all" || r.status === status.value)
      .filter((r) => tenantMatches(r, tenantInAddress()))
      .filter((r) => search.value === "" || r.session.toLowerCase().includes(search.value.toLowerCase()))
      .sort(
        (left, right) =>
          String(right.lastActivity ?? "").localeCompare(String(left.lastActivity ?? "")) ||
          left.session.localeCompare(right.session),
      );

  function render() {
    refreshTenants(tenantInAddress());
    const list = rows();
    selected = Math.min(selected, Math.max(0, list.length - 1));
    count.textContent = `${list.length} of ${store.rows.size} sessions`;
    body.replaceChildren(
      ...list.map((row, index) =>
        element(
          "tr",
          { class: index === selected ? "sel" : "", "data-session": row.session },
          element(
            "td",
            { class: "id" },
            element("a", { href: `#/session/${encodeURIComponent(row.session)}` }, row.session),
          ),
          element(
            "td",
            {},
            badge(row.status),
            // Retention moved it out of Redis: listed from the archive's summary, it opens from the archive.
            row.archived ? element("span", { class: "muted archived" }, " archived") : null,
          ),
          element("td", { class: row.tenant ? "tenant" : "tenant muted" }, row.tenant ?? "–"),
          element("td", { class: "num" }, row.turns ?? "–"),
          element("td", { class: "num" }, money(row.costUsd)),
          element("td", { class: "num" }, tokens(row.tokens)),
          element("td", { title: row.lastActivity ?? "" }, ago(row.lastActivity)),
          element("td", { class: row.lastErrorKind ? "error" : "muted" }, row.lastErrorKind ?? "–"),
          element(
            "td",
            { class: "num" },
            row.pendingDecisions ? element("a", { href: "#/decisions" }, String(row.pendingDecisions)) : "–",
          ),
          element(
            "td",
            { class: "num" },
            row.projectedSeq !== null && row.projectedSeq !== row.lastSeq
              ? `${row.lastSeq} (${row.projectedSeq})`
              : row.lastSeq,
          ),
        ),
      ),
    );
    if (list.length === 0)
      body.append(
        element(
          "tr",
          {},
          element("td", { colspan: 10, class: "empty" }, store.hello ? "no sessions match" : "connecting…"),
        ),
      );
  }
  search.addEventListener("input", render);
  status.addEventListener("change", render);
  tenant.addEventListener("change", () => {
    setTenantInAddress(tenant.value);
    render();
  });
  render();
  return {
    update: render,
    key(event) {
      const list = rows();
      if (event.key === "j" || event.key === "ArrowDown") selected = Math.min(list.length - 1, selected + 1);
      else if (event.key === "k" || event.key === "ArrowUp") selected = Math.max(0, selected - 1);
      else if (event.key === "Enter" && list[selected])
        location.hash = `#/session/${encodeURIComponent(list[selected].session)}`;
      else return;
      event.preventDefault();
      render();
    },
  };
}
