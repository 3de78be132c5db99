// Shared by `run --wait` and `demo`: follow one turn's events and print the transcript as it grows,
// with a progress line (state, tool calls, elapsed). Everything printed goes through `scrub`.
import { dataOf } from "../../events/index.ts";
import type { Envelope } from "../../log/index.ts";
import { parseLine, renderText } from "../../protocol/index.ts";
import type { Producer, TurnResult } from "../../queue/index.ts";

export interface FollowOptions {
  out: NodeJS.WritableStream & { isTTY?: boolean };
  scrub: (text: string) => string;
  /** Print transcript lines (false: progress only). */
  transcript?: boolean;
  timeoutMs?: number | undefined;
  /** Aborting it ends the wait (rejects). */
  signal?: AbortSignal | undefined;
  /** Every event of the turn, after the transcript has printed it. */
  onEvent?: ((event: Envelope) => void) | undefined;
}

export async function followTurn(producer: Producer, session: string, turn: string, options: FollowOptions): Promise<TurnResult> {
  const started = Date.now();
  let state = "queued";
  let toolCalls = 0;
  let attempt = 0;
  const write = (s: string): void => void options.out.write(options.scrub(s));
  const progress = (): void => write(`  · ${state}, attempt ${attempt}, ${toolCalls} tool call(s), ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  const onEvent = (e: Envelope): void => {
    printEvent(e);
    options.onEvent?.(e);
  };
  const printEvent = (e: Envelope): void => {
    switch (e.kind) {
      case "attempt.started":
        attempt = e.attempt;
        state = "running";
        progress();
        return;
      case "attempt.abandoned":
        state = "retrying";
        progress();
        return;
      case "cli.line": {
        const raw = dataOf("cli.line", e.data)?.raw;
        if (raw === undefined) return;
        const p = parseLine(raw);
        const o = p.line as { type?: string; message?: { content?: Array<{ type?: string }> } } | undefined;
        if (o?.type === "assistant") toolCalls += (o.message?.content ?? []).filter((b) => b.type === "tool_use").length;
        if (options.transcript === false) return;
        const text = renderText([p]);
        if (text.length > 0) write(`${text.replace(/^/gm, "  ")}\n`);
        return;
      }
      case "turn.finished":
      case "turn.failed":
      case "turn.cancelled":
        state = e.kind.slice("turn.".length);
        progress();
        return;
    }
  };
  return producer.waitForTurn(turn, { session, onEvent, timeoutMs: options.timeoutMs, signal: options.signal });
}
