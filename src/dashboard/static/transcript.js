// Transcript items: assistant text, tool calls with their results (long ones folded with their
// size, filled in only when opened), subagent work nested under the call that started it.
import { count, h, size } from "./dom.js";

const FOLD_CHARS = 1500;

/** The session a result belongs to, for fetching a long one whole (set by the session view). */
let sessionId = null;
export function setSession(id) {
  sessionId = id;
}

/** A long result, folded; the server sent only its start (`more` characters left out), fetched whole when opened. */
function folded(label, r, cls) {
  const total = r.text.length + (r.more ?? 0);
  if (total <= FOLD_CHARS) return h("div", { class: cls }, h("pre", {}, r.text));
  const pre = h("pre");
  const d = h(
    "details",
    { class: `${cls} folded` },
    h("summary", { class: "muted" }, `${label} · ${size(total)} (folded)`),
    pre,
  );
  d.addEventListener("toggle", async () => {
    if (!d.open || pre.textContent !== "") return;
    pre.textContent = r.text;
    if (!r.more || sessionId === null) return;
    const res = await fetch(`/api/sessions/${encodeURIComponent(sessionId)}/result?seq=${r.seq}`);
    if (res.ok) pre.textContent = (await res.json()).text;
    else pre.append(`\n… (${size(r.more)} more could not be loaded)`);
  });
  return d;
}

function callText(item) {
  const input = item.input ?? {};
  if (typeof input.command === "string") return input.command;
  if (typeof input.file_path === "string") return input.file_path;
  return JSON.stringify(input);
}

function resultEl(r) {
  const dropped = r.droppedChars > 0 ? h("div", { class: "muted" }, `${size(r.droppedChars)} more in the log`) : null;
  const label = r.isError ? "error result" : "result";
  const el = folded(label, r, `result${r.isError ? " err" : ""}`);
  el.dataset.seq = String(r.seq);
  return [el, dropped];
}

export function renderItem(item) {
  switch (item.t) {
    case "user":
      return h("div", { class: "item prompt", "data-seq": item.seq }, item.text);
    case "text":
      return h("div", { class: "item text", "data-seq": item.seq }, item.text);
    case "api_error":
      return h(
        "div",
        { class: "item error", "data-seq": item.seq },
        `API error: ${item.error}${item.text ? ` ${item.text}` : ""}`,
      );
    case "orphan_result":
      return h(
        "div",
        { class: "item tool", "data-seq": item.result.seq },
        h("div", { class: "muted" }, `result for ${item.toolUseId}`),
        resultEl(item.result),
      );
    case "tool": {
      const call = callText(item);
      const sub =
        item.subagent.length > 0
          ? h(
              "div",
              { class: "subagent" },
              h("div", { class: "subagent-label" }, `subagent · ${count(item.subagent.length, "item")}`),
              item.subagent.map(renderItem),
            )
          : null;
      return h(
        "div",
        { class: "item tool", "data-seq": item.seq, "data-tool": item.name },
        h(
          "div",
          { class: "call" },
          h("b", {}, item.name || "(unknown call)"),
          " ",
          call.length > 400 ? `${call.slice(0, 400)}… (${size(call.length)})` : call,
        ),
        sub,
        item.result === null ? h("div", { class: "muted" }, "… no result yet") : resultEl(item.result),
      );
    }
    default:
      return h("div", { class: "item muted" }, "(unknown item)");
  }
}
