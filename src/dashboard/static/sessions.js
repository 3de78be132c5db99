// Sessions: every session with status, tenant, turns, cost, tokens, last activity, last error and
// pending decisions; filter by status, tenant, label, cwd and last activity's date, search by id;
// live. j/k move, Enter opens. Sessions retention moved to the archive are listed too (the most
// recent), marked archived. The filters live in the address (`?tenant=`, `-` for sessions without
// one; `?status=`, `?label=name=value`, `?cwd=`, `?from=`, `?to=` as dates), so a filtered list can be
// linked to.
import { ago, badge, element, money, tokens } from "./dom.js";
import { store } from "./app.js";

const STATUSES = ["all", "running", "parked", "queued", "finished", "failed", "cancelled", "new"];
/** The tenant filter's values besides a tenant's name: every session, or those without a tenant. */
const ALL_TENANTS = "";
const NO_TENANT = "-";

/** A filter the address names ("" when it names none). */
const inAddress = (name) => new URLSearchParams(location.search).get(name) ?? "";
const tenantInAddress = () => inAddress("tenant") || ALL_TENANTS;

/** Puts a filter in the address (kept as the page moves between views), without a reload. */
function setInAddress(name, value) {
  const query = new URLSearchParams(location.search);
  if (value === "" || (name === "status" && value === "all")) query.delete(name);
  else query.set(name, value);
  const search = query.toString();
  history.replaceState(null, "", `${location.pathname}${search ? `?${search}` : ""}${location.hash}`);
}

/** `name=value`: the sessions whose labels hold it; just `name`: those carrying that label at all. */
function labelMatches(row, wanted) {
  if (wanted === "") return true;
  const at = wanted.indexOf("=");
  const name = (at < 0 ? wanted : wanted.slice(0, at)).trim();
  const labels = row.labels ?? {};
  if (!Object.hasOwn(labels, name)) return false;
  return at < 0 || labels[name] === wanted.slice(at + 1).trim();
}

const cwdMatches = (row, wanted) => wanted === "" || (row.cwd ?? "").includes(wanted);

/** Last activity on or after the day `from` and on or before the day `to` (UTC dates, as the list shows times). */
function dateMatches(row, from, to) {
  if (from === "" && to === "") return true;
  const day = (row.lastActivity ?? "").slice(0, 10);
  if (day === "") return false;
  return (from === "" || day >= from) && (to === "" || day <= to);
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
    { "aria-label": "filter by status", name: "status" },
    STATUSES.map((s) => element("option", { value: s }, s)),
  );
  const tenant = element("select", { "aria-label": "filter by tenant", name: "tenant" });
  const label = element("input", {
    type: "search",
    name: "label",
    placeholder: "label name=value",
    "aria-label": "filter by label",
    size: 16,
  });
  const cwd = element("input", {
    type: "search",
    name: "cwd",
    placeholder: "cwd contains",
    "aria-label": "filter by cwd",
    size: 16,
  });
  const from = element("input", { type: "date", name: "from", "aria-label": "last active from" });
  const to = element("input", { type: "date", name: "to", "aria-label": "last active to" });
  status.value = inAddress("status") || "all";
  label.value = inAddress("label");
  cwd.value = inAddress("cwd");
  from.value = inAddress("from");
  to.value = inAddress("to");
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
          "Cwd",
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
  root.append(element("div", { class: "toolbar" }, search, status, tenant, label, cwd, from, "–", to, count), table);

  const rows = () =>
    [...store.rows.values()]
      .filter((r) => status.value === "all" || r.status === status.value)
      .filter((r) => tenantMatches(r, tenantInAddress()))
      .filter((r) => labelMatches(r, label.value.trim()))
      .filter((r) => cwdMatches(r, cwd.value))
      .filter((r) => dateMatches(r, from.value, to.value))
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
          element("td", { class: row.cwd ? "cwd" : "cwd muted", title: row.cwd ?? "" }, row.cwd ?? "–"),
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
          element("td", { colspan: 11, class: "empty" }, store.hello ? "no sessions match" : "connecting…"),
        ),
      );
  }
  search.addEventListener("input", render);
  for (const [control, event] of [
    [status, "change"],
    [tenant, "change"],
    [label, "input"],
    [cwd, "input"],
    [from, "change"],
    [to, "change"],
  ])
    control.addEventListener(event, () => {
      setInAddress(control.name, control.value);
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
