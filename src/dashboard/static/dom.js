// Small DOM helpers. Text is always set as text (never parsed as HTML), so nothing from a log can
// become markup or script.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

/** "1 item", "3 items". */
export const count = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;
export const money = (n) => (n === null || n === undefined ? "–" : `$${n.toFixed(4)}`);
const num = (n) => (n >= 10000 ? `${(n / 1000).toFixed(1)}k` : String(n));
export const tokens = (t) => (t ? `${num(t.input + t.cacheRead + t.cacheCreation)} in · ${num(t.output)} out` : "–");
export function size(chars) {
  if (chars < 1024) return `${chars} B`;
  if (chars < 1024 * 1024) return `${(chars / 1024).toFixed(1)} KB`;
  return `${(chars / 1024 / 1024).toFixed(1)} MB`;
}
export function ago(iso) {
  if (!iso) return "–";
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return `${Math.max(0, s)}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  return new Date(iso).toISOString().slice(0, 16).replace("T", " ");
}
export function duration(from, to) {
  if (!from || !to) return "";
  const ms = Date.parse(to) - Date.parse(from);
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}
export const badge = (status) => h("span", { class: `badge s-${status}` }, status);

/** True when a key press belongs to a text field, not to the page's shortcuts. */
export const typing = (e) =>
  e.target instanceof HTMLInputElement ||
  e.target instanceof HTMLTextAreaElement ||
  e.target instanceof HTMLSelectElement ||
  e.ctrlKey ||
  e.metaKey ||
  e.altKey;
