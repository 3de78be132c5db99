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

function renderItems(items: TranscriptItem[], indent: string, out: string[], settings: Required<TextOptions>): void {
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
          `${indent}Tool Called: ${it.name || "(unknown call)"}(${capText(inputJson(it.input), settings.maxToolInputChars)})`,
        );
        if (it.subagent.length > 0) renderItems(it.subagent, indent + "  ", out, settings);
        if (it.result !== null) {
          out.push(
            `${indent}${it.result.isError ? "Tool Result (error)" : "Tool Result"}: ${capText(it.result.text, settings.maxToolResultChars)}`,
          );
        }
        break;
      case "orphan_result":
        out.push(
          `${indent}${it.result.isError ? "Tool Result (error)" : "Tool Result"}: ${capText(it.result.text, settings.maxToolResultChars)}`,
        );
        break;
    }
  }
}

export function acceptedAttempt(turn: TranscriptTurn): TranscriptAttempt | undefined {
  return turn.acceptedAttempt === null ? undefined : turn.attempts.find((a) => a.attempt === turn.acceptedAttempt);
}

/** The session's transcript as plain text: prompts, assistant text, tool calls with their results, subagents nested. */
export function renderTranscriptText(state: ProjectionState, opts: TextOptions = {}): string {
  const settings: Required<TextOptions> = {
    maxToolResultChars: opts.maxToolResultChars ?? 8000,
    maxToolInputChars: opts.maxToolInputChars ?? 30000,
    abandoned: opts.abandoned ?? true,
  };
  const out: string[] = [];
  const views = state.view.turns;
  state.transcript.turns.forEach((turn, turnIndex) => {
    const view = views[turnIndex]!;
    out.push(
      `── turn ${turn.turn} (${view.status}${view.errorKind !== null && view.errorKind !== "ok" ? `, ${view.errorKind}` : ""}) ──`,
    );
    if (turn.prompt !== null) out.push(`User: ${turn.prompt}`);
    for (const attempt of turn.attempts) {
      if (!attempt.abandoned) continue;
      if (!settings.abandoned) continue;
      out.push(`[abandoned attempt ${attempt.attempt}: ${attempt.abandonReason ?? "abandoned"}]`);
      renderItems(attempt.items, "  | ", out, settings);
    }
    const acc = acceptedAttempt(turn);
    if (acc !== undefined) renderItems(acc.items, "", out, settings);
  });
  return out.join("\n");
}

/** The conversation as AI-SDK (v5) model messages: prompts, accepted attempts' top-level work. */
export function toMessages(state: ProjectionState): AiSdkMessage[] {
  const out: AiSdkMessage[] = [];
  for (const turn of state.transcript.turns) {
    if (turn.prompt !== null) out.push({ role: "user", content: turn.prompt });
    const acc = acceptedAttempt(turn);
    if (acc === undefined) continue;
    let content: Array<AiSdkTextPart | AiSdkToolCallPart> = [];
    let calls: Extract<TranscriptItem, { t: "tool" }>[] = [];
    const flush = (): void => {
      if (content.length > 0) out.push({ role: "assistant", content });
      const done = calls.filter((c) => c.result !== null).sort((a, b) => a.result!.seq - b.result!.seq);
      if (done.length > 0) {
        out.push({
          role: "tool",
          content: done.map((call) => ({
            type: "tool-result" as const,
            toolCallId: call.id,
            toolName: call.name,
            output: call.result!.isError
              ? { type: "error-text" as const, value: call.result!.text }
              : { type: "text" as const, value: call.result!.text },
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
