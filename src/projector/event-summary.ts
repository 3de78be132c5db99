// One short line per event for `turnstream tail`: what happened, never a whole payload.
import { dataOf, isEventKind, type EventData, type EventKind } from "../events/index.ts";
import { stringField, type Obj } from "../kernel/index.ts";
import type { Envelope } from "../log/index.ts";
import { parseLine, toolResultText } from "../protocol/index.ts";
import { contentBlocks, objOf } from "../protocol/lines.ts";

function short(s: string, max = 100): string {
  const one = s.replace(/\s+/g, " ").trim();
  return one.length > max ? `${one.slice(0, max - 1)}…` : one;
}

function assistantBlock(b: Obj): string {
  if (b["type"] === "text") return `text: ${short(stringField(b, "text") ?? "")}`;
  if (b["type"] === "tool_use") return `tool_use ${stringField(b, "name") ?? ""} ${stringField(b, "id") ?? ""}`;
  return String(b["type"]);
}

function userBlock(b: Obj): string {
  if (b["type"] === "tool_result") {
    return `tool_result ${stringField(b, "tool_use_id") ?? ""}${b["is_error"] === true ? " (error)" : ""}: ${short(toolResultText(b["content"]), 60)}`;
  }
  if (b["type"] === "text") return `text: ${short(stringField(b, "text") ?? "")}`;
  return String(b["type"]);
}

export function summarizeCliLine(raw: string): string {
  const p = parseLine(raw);
  if (p.category === "invalid") return `invalid line (${raw.length} chars)`;
  const o = objOf(p);
  if (o === undefined) return "truncated line";
  const sub = p.category === "unknown" ? " (unknown)" : "";
  const parent = typeof o["parent_tool_use_id"] === "string" ? " [subagent]" : "";
  switch (o["type"]) {
    case "assistant": {
      const error = stringField(o, "error");
      if (error !== undefined) return `assistant API error: ${error}${parent}`;
      return `assistant ${contentBlocks(o).map(assistantBlock).join(", ")}${parent}${sub}`;
    }
    case "user":
      return `user ${contentBlocks(o).map(userBlock).join(", ")}${parent}${sub}`;
    case "result": {
      const cost = typeof o["total_cost_usd"] === "number" ? ` $${o["total_cost_usd"].toFixed(4)}` : "";
      return `result ${String(o["subtype"] ?? "")}${o["is_error"] === true ? " is_error" : ""}${cost}${sub}`;
    }
    default:
      return `${p.type}${sub}`;
  }
}

/** One line per kind, from data that fits the kind's schema; kinds not listed print nothing more. */
const summaries: { [K in EventKind]?: (data: EventData<K>) => string } = {
  "cli.line": (d) => summarizeCliLine(d.raw),
  "cli.stderr": () => "stderr output",
  "cli.exit": (d) => `exit code ${d.code ?? "?"}${d.signal !== null ? ` signal ${d.signal}` : ""}`,
  "turn.queued": (d) => `prompt (${d.prompt.length} chars)`,
  "attempt.abandoned": (d) => `reason ${d.reason}`,
  "turn.failed": (d) => d.errorKind,
  "decision.requested": (d) => `${d.requestId} ${d.tool}`,
  "decision.made": (d) => `${d.requestId} → ${d.decision} by ${d.by}`,
  "model.call": (d) => {
    const tokens = d.usage === undefined ? "" : ` ${d.usage.input_tokens} in ${d.usage.output_tokens} out`;
    const ttfb = d.ttfbMs === undefined ? "" : ` ttfb ${Math.round(d.ttfbMs)} ms`;
    return `${d.model ?? d.path} ${d.status}${ttfb}${tokens}${d.answeredBy === undefined ? "" : ` (${d.answeredBy})`}`;
  },
};

export function summarizeEvent(env: Pick<Envelope, "kind" | "data">): string {
  if (!isEventKind(env.kind)) return "";
  const summarize = summaries[env.kind] as ((data: unknown) => string) | undefined;
  if (summarize === undefined) return "";
  const data = dataOf(env.kind, env.data);
  if (data === undefined) return env.kind === "cli.line" ? "cli line" : "";
  return summarize(data);
}
