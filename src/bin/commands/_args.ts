// Argument parsing shared by the commands, so a parse error and --help are answered the same way by each.
import { parseArgs, type ParseArgsConfig } from "node:util";
import { TurnstreamError } from "../../kernel/index.ts";
import type { StopSignal } from "../exit-codes.ts";

export type ParsedArgs<T extends ParseArgsConfig> = ReturnType<typeof parseArgs<T>>;

/**
 * The parsed arguments, or the exit code when the command is done already: 2 after a parse error
 * (said on stderr with the usage), 0 after --help (the usage on stdout).
 */
export function parseCommandArgs<T extends ParseArgsConfig>(
  command: string,
  usage: string,
  config: T,
): ParsedArgs<T> | number {
  let parsed: ParsedArgs<T>;
  try {
    parsed = parseArgs(config);
  } catch (err) {
    process.stderr.write(`turnstream ${command}: ${(err as Error).message}\n${usage}`);
    return 2;
  }
  if ((parsed.values as { help?: unknown }).help === true) {
    process.stdout.write(usage);
    return 0;
  }
  return parsed;
}

/** Why an interrupt signal aborted: the signal that stopped the command. */
export class Interrupted extends TurnstreamError {
  readonly signal: StopSignal;
  constructor(signal: StopSignal) {
    super(`interrupted by ${signal}`, { code: "interrupted" });
    this.signal = signal;
  }
}

/**
 * An abort signal for Ctrl-C and SIGTERM, so a following command ends its read and closes cleanly; it
 * aborts with an Interrupted naming the signal.
 */
export function interruptSignal(): { signal: AbortSignal; release(): void } {
  const ac = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void =>
    ac.abort(new Interrupted(signal === "SIGINT" ? "SIGINT" : "SIGTERM"));
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  return {
    signal: ac.signal,
    release() {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    },
  };
}
