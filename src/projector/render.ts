// Renderings of the read models: a plain-text transcript and AI-SDK-style messages. Only accepted
// attempts make the conversation; abandoned attempts are shown apart (text) or left out (messages).
import { capText, type AiSdkMessage, type AiSdkTextPart, type AiSdkToolCallPart } from "../protocol/index.ts";
import type { ProjectionState, TranscriptAttempt, TranscriptItem, TranscriptTurn } from "./state.ts";

export interface TextOptions {
  maxToolResultChars?: number;
  maxToolInputChars?: number;
  /** Show abandoned attempts (marked) before the accepted one. Default true. */
  abandoned?: boolean;
}

function inputJson(input: unknown): string {
  return JSON.stringify(input ?? {}) ?? "{}";
}

function renderItems(items: TranscriptItem[], indent: string, out: string[], o: Required<TextOptions>): void {
  for (const it of items) {
    switch (it.t) {
      case "user":
        out.push(`${indent}User: ${it.text}`);
        break;
      case "text":
        out.push(indent + it.text);
        break;
      case "api_error":
        out.push(`${indent}[API error: ${it.error}]${it.text === "" ? "" : ` ${it.text}`}`);
        break;
      case "tool":
        out.push(
          `${indent}Tool Called: ${it.name || "(unknown call)"}(${capText(inputJson(it.input), o.maxToolInputChars)})`,
        );
        if (it.subagent.length > 0) renderItems(it.subagent, indent + "  ", out, o);
        if (it.result !== null) {
          out.push(
            `${indent}${it.result.isError ? "Tool Result (error)" : "Tool Result"}: ${capText(it.result.text, o.maxToolResultChars)}`,
          );
        }
        break;
      case "orphan_result":
        out.push(
          `${indent}${it.result.isError ? "Tool Result (error)" : "Tool Result"}: ${capText(it.result.text, o.maxToolResultChars)}`,
        );
        break;
    }
  }
}

export function acceptedAttempt(t: TranscriptTurn): TranscriptAttempt | undefined {
  return t.acceptedAttempt === null ? undefined : t.attempts.find((a) => a.attempt === t.acceptedAttempt);
}

/** The session's transcript as plain text: prompts, assistant text, tool calls with their results, subagents nested. */
export function renderTranscriptText(state: ProjectionState, opts: TextOptions = {}): string {
  const o: Required<TextOptions> = {
    maxToolResultChars: opts.maxToolResultChars ?? 8000,
    maxToolInputChars: opts.maxToolInputChars ?? 30000,
    abandoned: opts.abandoned ?? true,
  };
  const out: string[] = [];
  const views = state.view.turns;
  state.transcript.turns.forEach((t, i) => {
    const v = views[i]!;
    out.push(
      `── turn ${t.turn} (${v.status}${v.errorKind !== null && v.errorKind !== "ok" ? `, ${v.errorKind}` : ""}) ──`,
    );
    if (t.prompt !== null) out.push(`User: ${t.prompt}`);
    for (const a of t.attempts) {
      if (!a.abandoned) continue;
      if (!o.abandoned) continue;
      out.push(`[abandoned attempt ${a.attempt}: ${a.abandonReason ?? "abandoned"}]`);
      renderItems(a.items, "  | ", out, o);
    }
    const acc = acceptedAttempt(t);
    if (acc !== undefined) renderItems(acc.items, "", out, o);
  });
  return out.join("\n");
}

/** The conversation as AI-SDK (v5) model messages: prompts, accepted attempts' top-level work. */
export function toMessages(state: ProjectionState): AiSdkMessage[] {
  const out: AiSdkMessage[] = [];
  for (const t of state.transcript.turns) {
    if (t.prompt !== null) out.push({ role: "user", content: t.prompt });
    const acc = acceptedAttempt(t);
    if (acc === undefined) continue;
    let content: Array<AiSdkTextPart | AiSdkToolCallPart> = [];
    let calls: Extract<TranscriptItem, { t: "tool" }>[] = [];
    const flush = (): void => {
      if (content.length > 0) out.push({ role: "assistant", content });
      const done = calls.filter((c) => c.result !== null).sort((a, b) => a.result!.seq - b.result!.seq);
      if (done.length > 0) {
        out.push({
          role: "tool",
          content: done.map((c) => ({
            type: "tool-result" as const,
            toolCallId: c.id,
            toolName: c.name,
            output: c.result!.isError
              ? { type: "error-text" as const, value: c.result!.text }
              : { type: "text" as const, value: c.result!.text },
          })),
        });
      }
      content = [];
      calls = [];
    };
    for (const it of acc.items) {
      if (it.t === "text" || it.t === "api_error") {
        // A text after tool calls starts the next assistant message.
        if (calls.length > 0) flush();
        const text = it.t === "text" ? it.text : `[API error: ${it.error}]`;
        const last = content.at(-1);
        if (last !== undefined && last.type === "text") last.text += `\n${text}`;
        else content.push({ type: "text", text });
      } else if (it.t === "tool") {
        content.push({ type: "tool-call", toolCallId: it.id, toolName: it.name, input: it.input ?? {} });
        calls.push(it);
      } else if (it.t === "user") {
        flush();
        out.push({ role: "user", content: it.text });
      }
    }
    flush();
  }
  return out;
}
