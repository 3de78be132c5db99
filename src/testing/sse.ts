// Renders one scripted response as the Anthropic Messages API does: SSE events for streaming requests,
// one JSON message otherwise.
import { randomBytes } from "node:crypto";
import type { ContentResponse, ScriptBlock, ScriptUsage } from "./script.ts";

export interface SseEvent {
  event: string;
  data: Record<string, unknown>;
}

const newId = (prefix: string): string => `${prefix}_${randomBytes(12).toString("base64url")}`;

export function withToolIds(blocks: ScriptBlock[]): ScriptBlock[] {
  return blocks.map((b) => (b.type === "tool_use" && b.id === undefined ? { ...b, id: newId("toolu") } : b));
}

export function stopReasonOf(response: ContentResponse, blocks: ScriptBlock[]): string {
  return response.stopReason ?? (blocks.some((b) => b.type === "tool_use") ? "tool_use" : "end_turn");
}

export function usageOf(usage: ScriptUsage | undefined): Required<ScriptUsage> {
  return {
    input_tokens: usage?.input_tokens ?? 12,
    output_tokens: usage?.output_tokens ?? 6,
    cache_creation_input_tokens: usage?.cache_creation_input_tokens ?? 0,
    cache_read_input_tokens: usage?.cache_read_input_tokens ?? 0,
  };
}

function finalBlock(block: ScriptBlock): Record<string, unknown> {
  switch (block.type) {
    case "text":
      return { type: "text", text: block.text };
    case "thinking":
      return { type: "thinking", thinking: block.thinking, signature: block.signature ?? signatureFor(block.thinking) };
    case "redacted_thinking":
      return { type: "redacted_thinking", data: block.data ?? "cmVkYWN0ZWQ=" };
    case "tool_use":
      return { type: "tool_use", id: block.id, name: block.name, input: block.input };
  }
}

// A stable fake signature: the CLI only passes it back, it never checks it.
function signatureFor(text: string): string {
  return Buffer.from(`sig:${text.length}`).toString("base64");
}

/** Splits text into a few deltas so clients see real incremental streaming. */
function pieces(text: string, size = 24): string[] {
  if (text.length <= size) return [text];
  const out: string[] = [];
  for (let offset = 0; offset < text.length; offset += size) out.push(text.slice(offset, offset + size));
  return out;
}

function blockEvents(block: ScriptBlock, index: number): SseEvent[] {
  const delta = (fields: Record<string, unknown>): SseEvent => ({
    event: "content_block_delta",
    data: { type: "content_block_delta", index, delta: fields },
  });
  const start = (content_block: Record<string, unknown>): SseEvent => ({
    event: "content_block_start",
    data: { type: "content_block_start", index, content_block },
  });
  const events: SseEvent[] = [];
  switch (block.type) {
    case "text":
      events.push(
        start({ type: "text", text: "" }),
        ...pieces(block.text).map((t) => delta({ type: "text_delta", text: t })),
      );
      break;
    case "thinking":
      events.push(
        start({ type: "thinking", thinking: "", signature: "" }),
        ...pieces(block.thinking).map((t) => delta({ type: "thinking_delta", thinking: t })),
        delta({ type: "signature_delta", signature: block.signature ?? signatureFor(block.thinking) }),
      );
      break;
    case "redacted_thinking":
      events.push(start(finalBlock(block)));
      break;
    case "tool_use":
      events.push(
        start({ type: "tool_use", id: block.id, name: block.name, input: {} }),
        ...pieces(JSON.stringify(block.input), 40).map((j) => delta({ type: "input_json_delta", partial_json: j })),
      );
      break;
  }
  events.push({ event: "content_block_stop", data: { type: "content_block_stop", index } });
  return events;
}

export function messageStart(model: string, usage: Required<ScriptUsage>): SseEvent {
  return {
    event: "message_start",
    data: {
      type: "message_start",
      message: {
        id: newId("msg"),
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...usage, output_tokens: 1 },
      },
    },
  };
}

/** Events of every block, grouped per block so a stream error can be injected after block n. */
export function blockEventGroups(blocks: ScriptBlock[]): SseEvent[][] {
  return blocks.map((b, i) => blockEvents(b, i));
}

export function messageEnd(stopReason: string, usage: Required<ScriptUsage>): SseEvent[] {
  return [
    {
      event: "message_delta",
      data: {
        type: "message_delta",
        delta: { stop_reason: stopReason, stop_sequence: null },
        usage: { output_tokens: usage.output_tokens },
      },
    },
    { event: "message_stop", data: { type: "message_stop" } },
  ];
}

export function jsonMessage(
  model: string,
  blocks: ScriptBlock[],
  stopReason: string,
  usage: Required<ScriptUsage>,
): Record<string, unknown> {
  return {
    id: newId("msg"),
    type: "message",
    role: "assistant",
    model,
    content: blocks.map(finalBlock),
    stop_reason: stopReason,
    stop_sequence: null,
    usage,
  };
}

export const formatSse = (e: SseEvent): string => `event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`;
