// Shared by `run --wait` and `demo`: follow one turn's events and print the transcript as it grows,
// with a progress line (state, tool calls, elapsed). Everything printed goes through `scrub`.
import { forTerminal } from "../../kernel/index.ts";
import type { Envelope } from "../../log/index.ts";
import { renderText, type ParsedLine } from "../../protocol/index.ts";
import type { Producer, TurnResult } from "../../queue/index.ts";
import { cliLineParse, TurnProgress } from "../reports/progress.ts";
import { secondsText } from "../reports/turn-result.ts";

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
  /** The tracker to feed (the caller reads its figures after); default a fresh one. */
  progress?: TurnProgress | undefined;
}

export async function followTurn(
  producer: Producer,
  session: string,
  turn: string,
  options: FollowOptions,
): Promise<TurnResult> {
  const started = Date.now();
  const tracker = options.progress ?? new TurnProgress(turn);
  // The transcript is the model's and tools' text: escaped for the terminal, lines kept.
  const write = (s: string): void => void options.out.write(forTerminal(options.scrub(s), { multiline: true }));
  const progress = (): void =>
    write(
      `  · ${tracker.state}, attempt ${tracker.attempt}, ${tracker.toolCalls} tool call(s), ${secondsText((Date.now() - started) / 1000)}\n`,
    );
  const printTranscript = (parsed: ParsedLine | undefined): void => {
    if (parsed === undefined || options.transcript === false) return;
    const text = renderText([parsed]);
    if (text.length > 0) write(`${text.replace(/^/gm, "  ")}\n`);
  };
  const onEvent = (event: Envelope): void => {
    if (event.kind === "cli.line") {
      const parsed = cliLineParse(event);
      tracker.read(event, parsed);
      printTranscript(parsed);
    } else if (tracker.read(event)) progress();
    options.onEvent?.(event);
  };
  return producer.waitForTurn(turn, { session, onEvent, timeoutMs: options.timeoutMs, signal: options.signal });
}
