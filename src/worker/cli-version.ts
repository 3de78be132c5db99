// The CLI's version for attempt.started: `claude --version` of the binary the worker's runs use, read
// once per worker (the binary does not change under a running worker) and shared by every turn.
import { cliVersion, resolveClaudeBin } from "../runner/index.ts";
import type { Logger } from "../kernel/index.ts";

// `claude --version` prints e.g. "2.1.332 (Claude Code)"; the init line's claude_code_version is the first word.
const VERSION = /^\d+\.\d+\.\d+\S*/;
const VERSION_TIMEOUT_MS = 10_000;

/** Starts reading the version now; the result resolves to undefined when it cannot be read. */
export function cliVersionReader(
  claudeBin: string | undefined,
  env: Record<string, string | undefined>,
  logger: Logger,
): () => Promise<string | undefined> {
  const read = (async (): Promise<string | undefined> => {
    try {
      const printed = await cliVersion(resolveClaudeBin({ claudeBin, env }), VERSION_TIMEOUT_MS);
      return VERSION.exec(printed)?.[0];
    } catch (err) {
      logger.warn(
        { err: { message: (err as Error).message } },
        "could not read the CLI's version; attempts will not record it",
      );
      return undefined;
    }
  })();
  return () => read;
}
