// The console: one fleet stream (sessions, decisions, queue, tenants, model cooldowns) for the whole
// page, a router over the location hash, and the views. Keyboard: 1 sessions, 2 decisions, 3 queue,
// 4 tenants, 5 trust rules, 6 charts, 7 workers, 8 search in transcripts, / the view's search field.
import { element, typing } from "./dom.js";
import { sessionsView } from "./sessions.js";
import { sessionView } from "./session.js";
import { inboxView } from "./inbox.js";
import { queueView } from "./queue.js";
import { tenantsView } from "./tenants.js";
import { rulesView } from "./rules.js";
import { chartsView } from "./charts.js";
import { workersView } from "./workers.js";
import { searchView } from "./search.js";

const csrf = document.querySelector('meta[name="ts-csrf"]').getAttribute("content");
export const store = { hello: null, rows: new Map(), pending: [], queue: null, tenants: null, cooldowns: [] };
const main = document.getElementById("main");
let current = null;

/** Posts a state change with the CSRF header; the answer's JSON, or an Error with its message. */
export async function post(path, body) {
  const res = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Turnstream-CSRF": csrf },
    body: JSON.stringify(body),
  });
  const data = await res.json().catch(() => ({ error: res.statusText }));
  if (!res.ok) throw new Error(data.error || res.statusText);
  return data;
}

function connect() {
  const es = new EventSource("/api/fleet");
  const conn = document.getElementById("conn");
  es.onopen = () => conn.classList.add("on");
  es.onerror = () => conn.classList.remove("on");
  const on = (name, fn) =>
    es.addEventListener(name, (message) => {
      fn(JSON.parse(message.data));
      current?.update?.(name);
    });
  on("hello", (hello) => {
    store.hello = hello;
    document.getElementById("whoami").textContent = hello.canDecide
      ? `deciding as ${hello.operator}`
      : "read-only (no operator key)";
  });
  on("sessions", (rows) => (store.rows = new Map(rows.map((r) => [r.session, r]))));
  on("row", (r) => store.rows.set(r.session, r));
  on("pending", (pending) => {
    store.pending = pending;
    const waiting = pending.filter((x) => x.status === "pending" || x.status === "parked").length;
    const counter = document.getElementById("pending-count");
    counter.hidden = waiting === 0;
    counter.textContent = String(waiting);
  });
  on("queue", (q) => (store.queue = q));
  on("tenants", (tenants) => (store.tenants = tenants));
  on("cooldowns", (cooldowns) => (store.cooldowns = cooldowns));
}

const VIEWS = {
  decisions: inboxView,
  queue: queueView,
  tenants: tenantsView,
  rules: rulesView,
  charts: chartsView,
  workers: workersView,
  search: searchView,
};
const KEYS = {
  1: "sessions",
  2: "decisions",
  3: "queue",
  4: "tenants",
  5: "rules",
  6: "charts",
  7: "workers",
  8: "search",
};

function route() {
  // A view's own settings follow a `?` in the hash (#/charts?window=7d); the path is before it.
  const parts = location.hash.replace(/^#\/?/, "").split("?")[0].split("/").map(decodeURIComponent);
  current?.unmount?.();
  main.replaceChildren();
  const name = parts[0] || "sessions";
  for (const link of document.querySelectorAll("[data-nav]"))
    link.classList.toggle("active", link.dataset.nav === (name === "session" ? "sessions" : name));
  if (name === "session" && parts[1])
    current = sessionView(
      main,
      parts[1],
      parts[2] === "at" ? Number(parts[3]) : null,
      parts[2] === "turn" ? (parts[3] ?? null) : null,
    );
  else current = (Object.hasOwn(VIEWS, name) ? VIEWS[name] : sessionsView)(main);
}

document.addEventListener("keydown", (event) => {
  if (typing(event)) return;
  const to = KEYS[event.key];
  if (to) location.hash = `#/${to}`;
  else if (event.key === "/") {
    const search = document.querySelector("input[type=search]");
    if (search) {
      event.preventDefault();
      search.focus();
    }
  } else current?.key?.(event);
});
window.addEventListener("hashchange", route);
route();
// A session or the charts opened directly get the server first: the fleet stream (which lists every
// session) starts once their own data is in.
if (current?.loading) {
  let started = false;
  const start = () => !started && (started = true) && connect();
  window.addEventListener("ts:snapshot", start, { once: true });
  window.addEventListener("ts:charts", start, { once: true });
  setTimeout(start, 2000);
} else connect();
export { element };
