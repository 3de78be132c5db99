// Every byte the projector's commands print goes through one function, so a scrubber (the
// telemetry engineer's) can be plugged in at one place: `createOutput(stream, { scrub })`.
import type { Writable } from "node:stream";

export type Scrub = (text: string) => string;

export interface Output {
  /** Writes text as is (after scrubbing). */
  write(text: string): void;
  /** Writes a line (adds "\n"). */
  line(text: string): void;
  /** Resolves once everything written has been handed to the stream. */
  drain(): Promise<void>;
  readonly color: boolean;
}

export interface OutputOptions {
  scrub?: Scrub;
  /** Force colour on/off; default: on for a TTY unless NO_COLOR is set. */
  color?: boolean;
  env?: NodeJS.ProcessEnv;
}

export function createOutput(stream: Writable & { isTTY?: boolean }, options: OutputOptions = {}): Output {
  const env = options.env ?? process.env;
  const color = options.color ?? (stream.isTTY === true && (env["NO_COLOR"] === undefined || env["NO_COLOR"] === ""));
  const scrub = options.scrub ?? ((s: string) => s);
  let pending: Promise<void> = Promise.resolve();
  const write = (text: string): void => {
    if (!stream.write(scrub(text))) {
      pending = new Promise((resolve) => stream.once("drain", () => resolve()));
    }
  };
  return {
    write,
    line: (s: string) => write(s + "\n"),
    drain: () => pending,
    color,
  };
}

const codes: Record<string, [number, number]> = {
  dim: [2, 22],
  red: [31, 39],
  green: [32, 39],
  yellow: [33, 39],
  blue: [34, 39],
  magenta: [35, 39],
  cyan: [36, 39],
};

export function paint(on: boolean, style: keyof typeof codes, text: string): string {
  if (!on) return text;
  const [open, close] = codes[style]!;
  return `\u001b[${open}m${text}\u001b[${close}m`;
}
