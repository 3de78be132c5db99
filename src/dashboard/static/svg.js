// SVG built with the DOM: element names and attributes are ours, and every text (a tenant, a label,
// a tool's name) goes in as a text node, so nothing from a log becomes markup. Colours come from
// classes in style.css (the CSP allows no inline style).
const NS = "http://www.w3.org/2000/svg";

export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    el.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** A hover text for a mark: SVG's own tooltip. */
export const tip = (text) => svg("title", {}, text);

/** "850 ms", "12.3 s", "4.2 min", "1.5 h". */
export function ms(value) {
  if (value === null || value === undefined) return "–";
  if (value < 1000) return `${Math.round(value)} ms`;
  if (value < 60_000) return `${(value / 1000).toFixed(1)} s`;
  if (value < 3_600_000) return `${(value / 60_000).toFixed(1)} min`;
  return `${(value / 3_600_000).toFixed(1)} h`;
}

/** A time on an axis (UTC, as the console shows times): the clock within a day, the date and clock beyond. */
export function clock(atMs, spanMs) {
  const iso = new Date(atMs).toISOString();
  return spanMs <= 86_400_000 ? iso.slice(11, 16) : `${iso.slice(5, 10)} ${iso.slice(11, 16)}`;
}

/** A long name shortened for a chart's label (the whole name is in the row's tooltip). */
export const clip = (text, chars) => (text.length > chars ? `${text.slice(0, chars - 1)}…` : text);

/**
 * Horizontal bars, one row per entry: its name, a bar as long as its value is of the largest, and its
 * figure. `rows`: [{ key, value, text, cls }]; each row carries data-key and data-value for tests.
 */
export function barRows(id, rows, { width = 560, labelWidth = 180, rowHeight = 22 } = {}) {
  const max = Math.max(0, ...rows.map((row) => row.value));
  const barSpace = width - labelWidth - 160;
  const height = Math.max(rowHeight, rows.length * rowHeight);
  return svg(
    "svg",
    { id, class: "chart bars", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" },
    rows.map((row, index) => {
      const top = index * rowHeight;
      const barWidth = max === 0 ? 0 : (row.value / max) * barSpace;
      return svg(
        "g",
        { class: `row ${row.cls ?? ""}`, "data-key": row.key, "data-value": row.value },
        tip(`${row.key}: ${row.text}`),
        svg(
          "text",
          { x: labelWidth - 6, y: top + rowHeight * 0.7, class: "label", "text-anchor": "end" },
          clip(row.key, 26),
        ),
        svg("rect", { x: labelWidth, y: top + 3, width: barWidth.toFixed(2), height: rowHeight - 6, class: "bar" }),
        svg("text", { x: labelWidth + barWidth + 6, y: top + rowHeight * 0.7, class: "figure" }, row.text),
      );
    }),
  );
}
