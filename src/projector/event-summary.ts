// One short line per event for `turnstream tail`: what happened, never a whole payload.
import { isObj, type Obj } from "../kernel/index.ts";
import type { Envelope } from "../log/index.ts";
import { parseLine, toolResultText } from "../protocol/index.ts";


function short(s: string, max = 100): string {
  const one = s.replace(/\s+/g, " ").trim();
  return one.length > max ? `${one.slice(0, max - 1)}…` : one;
}

function blocks(o: Obj): Obj[] {
  const m = o["message"];
  if (!isObj(m)) return [];
  const c = m["content"];
  if (typeof c === "string") return [{ type: "text", text: c }];
  return Array.isArray(c) ? c.filter(isObj) : [];
}

export function summarizeCliLine(raw: string): string {
  const p = parseLine(raw);
  if (p.category === "invalid") return `invalid line (${raw.length} chars)`;
  if (p.category === "truncated") return "truncated line";
  const o = p.line as Obj;
  const sub = p.category === "unknown" ? " (unknown)" : "";
  const parent = typeof o["parent_tool_use_id"] === "string" ? " [subagent]" : "";
  switch (o["type"]) {
    case "assistant": {
      if (typeof o["error"] === "string") return `assistant API error: ${o["error"]}${parent}`;
      const parts = blocks(o).map((b) => {
        if (b["type"] === "text") return `text: ${short(String(b["text"] ?? ""))}`;
        if (b["type"] === "tool_use") return `tool_use ${String(b["name"] ?? "")} ${String(b["id"] ?? "")}`;
        return String(b["type"]);
      });
      return `assistant ${parts.join(", ")}${parent}${sub}`;
    }
    case "user": {
      const parts = blocks(o).map((b) => {
        if (b["type"] === "tool_result") return `tool_result ${String(b["tool_use_id"] ?? "")}${b["is_error"] === true ? " (error)" : ""}: ${short(toolResultText(b["content"]), 60)}`;
        if (b["type"] === "text") return `text: ${short(String(b["text"] ?? ""))}`;
        return String(b["type"]);
      });
      return `user ${parts.join(", ")}${parent}${sub}`;
    }
    case "result": {
      const cost = typeof o["total_cost_usd"] === "number" ? ` $${o["total_cost_usd"].toFixed(4)}` : "";
      return `result ${String(o["subtype"] ?? "")}${o["is_error"] === true ? " is_error" : ""}${cost}${sub}`;
    }
    default:
      return `${p.type}${sub}`;
  }
}

export function summarizeEvent(env: Pick<Envelope, "kind" | "data">): string {
  const d = isObj(env.data) ? env.data : {};
  switch (env.kind) {
    case "cli.line":
      return typeof d["raw"] === "string" ? summarizeCliLine(d["raw"]) : "cli line";
    case "cli.stderr":
      return "stderr output";
    case "cli.exit":
      return `exit code ${String(d["code"] ?? "?")}${typeof d["signal"] === "string" ? ` signal ${d["signal"]}` : ""}`;
    case "turn.queued":
      return typeof d["prompt"] === "string" ? `prompt (${d["prompt"].length} chars)` : "queued";
    case "attempt.abandoned":
      return `reason ${String(d["reason"] ?? "?")}`;
    case "turn.failed":
    case "turn.finished":
      return typeof d["errorKind"] === "string" ? d["errorKind"] : "";
    case "decision.requested":
      return `${String(d["requestId"] ?? "")} ${String(d["toolName"] ?? "")}`.trim();
    case "decision.made":
      return `${String(d["requestId"] ?? "")} → ${String(d["decision"] ?? "")}${typeof d["by"] === "string" ? ` by ${d["by"]}` : ""}`;
    default:
      return "";
  }
}
