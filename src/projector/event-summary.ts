// One short line per event for `turnstream tail`: what happened, never a whole payload.
import { dataOf, isEventKind, type EventData, type EventKind } from "../events/index.ts";
import { stringField, type Obj } from "../kernel/index.ts";
import type { Envelope } from "../log/index.ts";
import { parseLine, toolResultText } from "../protocol/index.ts";
import { contentBlocks, objOf } from "../protocol/index.ts";

function short(text: string, max = 100): string {
  const one = text.replace(/\s+/g, " ").trim();
  return one.length > max ? `${one.slice(0, max - 1)}…` : one;
}

function assistantBlock(block: Obj): string {
  if (block["type"] === "text") return `text: ${short(stringField(block, "text") ?? "")}`;
  if (block["type"] === "tool_use")
    return `tool_use ${stringField(block, "name") ?? ""} ${stringField(block, "id") ?? ""}`;
  return String(block["type"]);
}

function userBlock(block: Obj): string {
  if (block["type"] === "tool_result") {
    return `tool_result ${stringField(block, "tool_use_id") ?? ""}${block["is_error"] === true ? " (error)" : ""}: ${short(toolResultText(block["content"]), 60)}`;
  }
  if (block["type"] === "text") return `text: ${short(stringField(block, "text") ?? "")}`;
  return String(block["type"]);
}

export function summarizeCliLine(raw: string): string {
  const parsed = parseLine(raw);
  if (parsed.category === "invalid") return `invalid line (${raw.length} chars)`;
  const line = objOf(parsed);
  if (line === undefined) return "truncated line";
  const sub = parsed.category === "unknown" ? " (unknown)" : "";
  const parent = typeof line["parent_tool_use_id"] === "string" ? " [subagent]" : "";
  switch (line["type"]) {
    case "assistant": {
      const error = stringField(line, "error");
      if (error !== undefined) return `assistant API error: ${error}${parent}`;
      return `assistant ${contentBlocks(line).map(assistantBlock).join(", ")}${parent}${sub}`;
    }
    case "user":
      return `user ${contentBlocks(line).map(userBlock).join(", ")}${parent}${sub}`;
    case "result": {
      const cost = typeof line["total_cost_usd"] === "number" ? ` $${line["total_cost_usd"].toFixed(4)}` : "";
      return `result ${String(line["subtype"] ?? "")}${line["is_error"] === true ? " is_error" : ""}${cost}${sub}`;
    }
    default:
      return `${parsed.type}${sub}`;
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
  "turn.parked": (d) => `${d.requestId} ${d.tool} waits for a decision until ${d.deadline} (park ${d.parks})`,
  "decision.requested": (d) => `${d.requestId} ${d.tool}`,
  "decision.made": (d) => `${d.requestId} → ${d.decision} by ${d.by}`,
  "model.call": (call) => {
    const tokens = call.usage === undefined ? "" : ` ${call.usage.input_tokens} in ${call.usage.output_tokens} out`;
    const ttfb = call.ttfbMs === undefined ? "" : ` ttfb ${Math.round(call.ttfbMs)} ms`;
    const how = call.answeredBy ?? call.streamError;
    return `${call.model ?? call.path} ${call.status}${ttfb}${tokens}${how === undefined ? "" : ` (${how})`}`;
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
