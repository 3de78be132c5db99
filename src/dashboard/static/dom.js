// Small DOM helpers. Text is always set as text (never parsed as HTML), so nothing from a log can
// become markup or script.
export function element(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") el.className = value;
    else if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** A table: a header row of `head`, then `rows`, or one row saying `empty` when there are none. */
export function table(attrs, head, rows, empty) {
  const header = element(
    "tr",
    {},
    head.map((title) => element("th", {}, title)),
  );
  const none = element("tr", {}, element("td", { colspan: head.length, class: "empty" }, empty));
  return element("table", attrs, element("thead", {}, header), element("tbody", {}, rows.length === 0 ? none : rows));
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
  const seconds = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (seconds < 60) return `${Math.max(0, seconds)}s ago`;
  if (seconds < 3600) return `${Math.round(seconds / 60)}m ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)}h ago`;
  return new Date(iso).toISOString().slice(0, 16).replace("T", " ");
}
export function duration(from, to) {
  if (!from || !to) return "";
  const ms = Date.parse(to) - Date.parse(from);
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}
export const badge = (status) => element("span", { class: `badge s-${status}` }, status);

/** True when a key press belongs to a text field, not to the page's shortcuts. */
export const typing = (event) =>
  event.target instanceof HTMLInputElement ||
  event.target instanceof HTMLTextAreaElement ||
  event.target instanceof HTMLSelectElement ||
  event.ctrlKey ||
  event.metaKey ||
  event.altKey;
