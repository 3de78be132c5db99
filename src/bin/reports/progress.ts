// The progress of a batch's turns while they run: one tracker per turn fed from its events, and two
// views of them. On a terminal, one live line per turn redrawn in place (status, attempt, tool calls,
// elapsed); anywhere else (a CI log, a pipe) one plain line each time a turn's status changes, so
// the log reads in order and never holds cursor movements.
import { costAdded, dataOf } from "../../events/index.ts";
import { isObj, numberField, objField } from "../../kernel/index.ts";
import type { Envelope } from "../../log/index.ts";
import { zeroTokens, type Tokens } from "../../projector/index.ts";
import { parseLine, type ParsedLine } from "../../protocol/index.ts";
import { secondsText, type TurnFigures } from "./turn-result.ts";

/** The protocol's parse of a `cli.line` event's text (undefined when its data has none). */
export function cliLineParse(event: Envelope): ParsedLine | undefined {
  const raw = dataOf("cli.line", event.data)?.raw;
  return raw === undefined ? undefined : parseLine(raw);
}

/** One CLI run of the turn: where its CLI session's running total stood as it started, and stands now. */
interface RunSpend {
  attempt: number;
  baseUsd: number;
  totalUsd: number | undefined;
}

export class TurnProgress {
  state = "queued";
  attempt = 0;
  toolCalls = 0;
  /** When the first attempt started (its event's time), and when the turn ended. */
  startedAtMs: number | undefined;
  endedAtMs: number | undefined;
  readonly label: string;
  /** The tokens of every result line of every run. */
  readonly tokens: Tokens = zeroTokens();
  readonly #runs: RunSpend[] = [];

  constructor(label: string) {
    this.label = label;
  }

  /**
   * Reads one event of the turn; true when the status line changed. For a `cli.line`, pass the
   * line's parse when the caller has it, so it is not parsed twice.
   */
  read(event: Envelope, parsed?: ParsedLine): boolean {
    switch (event.kind) {
      case "attempt.started":
        this.attempt = event.attempt;
        this.startedAtMs ??= Date.parse(event.at);
        this.state = "running";
        this.#runs.push({
          attempt: event.attempt,
          baseUsd: dataOf("attempt.started", event.data)?.costBaseUsd ?? 0,
          totalUsd: undefined,
        });
        return true;
      case "attempt.abandoned":
        this.state = "retrying";
        return true;
      // Waits for an operator's decision holding nothing; its next attempt.started says it resumed.
      case "turn.parked":
        this.state = "parked";
        return true;
      case "cli.line": {
        const line = parsed ?? cliLineParse(event);
        this.#countSpend(event.attempt, line);
        return this.#countToolCalls(line);
      }
      case "turn.finished":
      case "turn.failed":
      case "turn.cancelled":
        this.state = event.kind.slice("turn.".length);
        this.endedAtMs = Date.parse(event.at);
        return true;
      default:
        return false;
    }
  }

  #countToolCalls(parsed: ParsedLine | undefined): boolean {
    const line = parsed?.line as { type?: string; message?: { content?: Array<{ type?: string }> } } | undefined;
    if (line?.type !== "assistant") return false;
    const calls = (line.message?.content ?? []).filter((b) => b.type === "tool_use").length;
    this.toolCalls += calls;
    return calls > 0;
  }

  /**
   * A result line's spend: its running total (the latest replaces the run's: the CLI counts on from
   * its session's earlier turns) and its tokens (each result's own, so they add up), as the projector counts.
   */
  #countSpend(attempt: number, parsed: ParsedLine | undefined): void {
    const line = parsed?.line;
    if (!isObj(line) || line["type"] !== "result") return;
    const total = numberField(line, "total_cost_usd");
    const run = this.#runs.findLast((r) => r.attempt === attempt);
    if (total !== undefined && run !== undefined) run.totalUsd = total;
    const usage = objField(line, "usage");
    if (usage === undefined) return;
    this.tokens.input += numberField(usage, "input_tokens") ?? 0;
    this.tokens.output += numberField(usage, "output_tokens") ?? 0;
    this.tokens.cacheRead += numberField(usage, "cache_read_input_tokens") ?? 0;
    this.tokens.cacheCreation += numberField(usage, "cache_creation_input_tokens") ?? 0;
  }

  /** What the turn's runs cost so far, abandoned attempts included. */
  costUsd(): number {
    return this.#runs.reduce(
      (sum, run) => sum + (run.totalUsd === undefined ? 0 : costAdded(run.baseUsd, run.totalUsd)),
      0,
    );
  }

  /** What following the turn measured of it, for its report. */
  figures(nowMs = Date.now()): TurnFigures {
    return {
      toolCalls: this.toolCalls,
      seconds: this.seconds(nowMs),
      costUsd: this.costUsd(),
      tokens: { ...this.tokens },
    };
  }

  /** Seconds the turn has run (or ran): from its first attempt's start to its end, or to now. */
  seconds(nowMs = Date.now()): number {
    if (this.startedAtMs === undefined) return 0;
    return Math.max(0, ((this.endedAtMs ?? nowMs) - this.startedAtMs) / 1000);
  }

  line(labelWidth: number): string {
    return `${this.label.padEnd(labelWidth)}  ${this.state.padEnd(9)} attempt ${this.attempt}  ${this.toolCalls} tool call(s)  ${secondsText(this.seconds())}`;
  }
}

export interface ProgressView {
  /** A turn's status line changed. */
  changed(index: number): void;
  /**
   * Prints something else (a parked turn's notice, on stderr) between the status lines: the live view
   * takes its lines off the terminal first and draws them again below, so its cursor moves stay right.
   */
  interject(print: () => void): void;
  /** The batch is over: the last state stays on screen. */
  close(): void;
}

type Write = (text: string) => void;

/** One plain line per change: `[3/20] label  running  attempt 1 …`. */
export class PlainProgress implements ProgressView {
  readonly #turns: readonly TurnProgress[];
  readonly #write: Write;
  readonly #labelWidth: number;

  constructor(turns: readonly TurnProgress[], write: Write) {
    this.#turns = turns;
    this.#write = write;
    this.#labelWidth = Math.min(40, Math.max(...turns.map((t) => t.label.length)));
  }

  changed(index: number): void {
    this.#write(`[${index + 1}/${this.#turns.length}] ${this.#turns[index]!.line(this.#labelWidth)}\n`);
  }

  interject(print: () => void): void {
    print();
  }

  close(): void {}
}

/** How often the live view redraws at most, and at least (so elapsed times move). */
const REDRAW_MIN_MS = 100;
const REDRAW_TICK_MS = 1000;

/** One line per turn on a terminal, redrawn in place by moving the cursor back up over them. */
export class LiveProgress implements ProgressView {
  readonly #turns: readonly TurnProgress[];
  readonly #write: Write;
  readonly #labelWidth: number;
  readonly #columns: number;
  readonly #tick: NodeJS.Timeout;
  #drawn = false;
  #pending: NodeJS.Timeout | undefined;

  constructor(turns: readonly TurnProgress[], write: Write, columns: number) {
    this.#turns = turns;
    this.#write = write;
    this.#columns = columns;
    this.#labelWidth = Math.min(40, Math.max(...turns.map((t) => t.label.length)));
    this.#tick = setInterval(() => this.#draw(), REDRAW_TICK_MS).unref();
    this.#draw();
  }

  changed(): void {
    this.#pending ??= setTimeout(() => {
      this.#pending = undefined;
      this.#draw();
    }, REDRAW_MIN_MS).unref();
  }

  interject(print: () => void): void {
    // Up over the drawn lines, cleared to the end of the screen: what is printed takes their place.
    if (this.#drawn) this.#write(`\x1b[${this.#turns.length}A\r\x1b[J`);
    this.#drawn = false;
    print();
    this.#draw();
  }

  close(): void {
    clearInterval(this.#tick);
    clearTimeout(this.#pending);
    this.#draw();
  }

  #draw(): void {
    // Lines cut to the terminal's width: a wrapped line would throw the cursor arithmetic off.
    const lines = this.#turns.map(
      (t) => `\r\x1b[2K${t.line(this.#labelWidth).slice(0, Math.max(1, this.#columns - 1))}\n`,
    );
    this.#write(`${this.#drawn ? `\x1b[${this.#turns.length}A` : ""}${lines.join("")}`);
    this.#drawn = true;
  }
}

/** The live view when `terminal` is one tall enough for every turn, else plain lines. */
export function progressView(
  turns: readonly TurnProgress[],
  terminal: NodeJS.WriteStream | undefined,
  write: Write,
): ProgressView {
  const fits = terminal?.isTTY === true && (terminal.rows ?? 0) > turns.length;
  return fits ? new LiveProgress(turns, write, terminal.columns ?? 80) : new PlainProgress(turns, write);
}
