// Argument parsing shared by the commands, so a parse error and --help are answered the same way by each.
import { parseArgs, type ParseArgsConfig } from "node:util";

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

/** An abort signal for Ctrl-C and SIGTERM, so a following command ends its read and closes cleanly. */
export function interruptSignal(): { signal: AbortSignal; release(): void } {
  const ac = new AbortController();
  const onSignal = (): void => ac.abort();
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
