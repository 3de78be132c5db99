// Transcript items: assistant text, tool calls with their results (long ones folded with their
// size, filled in only when opened), subagent work nested under the call that started it.
import { count, element, size } from "./dom.js";

const FOLD_CHARS = 1500;

/** The session a result belongs to, for fetching a long one whole (set by the session view). */
let sessionId = null;
export function setSession(id) {
  sessionId = id;
}

/** A long result, folded; the server sent only its start (`more` characters left out), fetched whole when opened. */
function folded(label, result, cls) {
  const total = result.text.length + (result.more ?? 0);
  if (total <= FOLD_CHARS) return element("div", { class: cls }, element("pre", {}, result.text));
  const pre = element("pre");
  const details = element(
    "details",
    { class: `${cls} folded` },
    element("summary", { class: "muted" }, `${label} · ${size(total)} (folded)`),
    pre,
  );
  details.addEventListener("toggle", async () => {
    if (!details.open || pre.textContent !== "") return;
    pre.textContent = result.text;
    if (!result.more || sessionId === null) return;
    const res = await fetch(`/api/sessions/${encodeURIComponent(sessionId)}/result?seq=${result.seq}`);
    if (res.ok) pre.textContent = (await res.json()).text;
    else pre.append(`\n… (${size(result.more)} more could not be loaded)`);
  });
  return details;
}

function callText(item) {
  const input = item.input ?? {};
  if (typeof input.command === "string") return input.command;
  if (typeof input.file_path === "string") return input.file_path;
  return JSON.stringify(input);
}

function resultEl(result) {
  const dropped =
    result.droppedChars > 0 ? element("div", { class: "muted" }, `${size(result.droppedChars)} more in the log`) : null;
  const label = result.isError ? "error result" : "result";
  const el = folded(label, result, `result${result.isError ? " err" : ""}`);
  el.dataset.seq = String(result.seq);
  return [el, dropped];
}

export function renderItem(item) {
  switch (item.t) {
    case "user":
      return element("div", { class: "item prompt", "data-seq": item.seq }, item.text);
    case "text":
      return element("div", { class: "item text", "data-seq": item.seq }, item.text);
    case "api_error":
      return element(
        "div",
        { class: "item error", "data-seq": item.seq },
        `API error: ${item.error}${item.text ? ` ${item.text}` : ""}`,
      );
    case "orphan_result":
      return element(
        "div",
        { class: "item tool", "data-seq": item.result.seq },
        element("div", { class: "muted" }, `result for ${item.toolUseId}`),
        resultEl(item.result),
      );
    case "tool": {
      const call = callText(item);
      const sub =
        item.subagent.length > 0
          ? element(
              "div",
              { class: "subagent" },
              element("div", { class: "subagent-label" }, `subagent · ${count(item.subagent.length, "item")}`),
              item.subagent.map(renderItem),
            )
          : null;
      return element(
        "div",
        { class: "item tool", "data-seq": item.seq, "data-tool": item.name },
        element(
          "div",
          { class: "call" },
          element("b", {}, item.name || "(unknown call)"),
          " ",
          call.length > 400 ? `${call.slice(0, 400)}… (${size(call.length)})` : call,
        ),
        sub,
        item.result === null ? element("div", { class: "muted" }, "… no result yet") : resultEl(item.result),
      );
    }
    default:
      return element("div", { class: "item muted" }, "(unknown item)");
  }
}
