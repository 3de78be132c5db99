// The projector as a long-running process: start, run until SIGTERM/SIGINT, stop cleanly within a
// bound. Shared by `turnstream projector` and workers/projector.ts.
import { DEFAULT_PREFIX, type Logger } from "../kernel/index.ts";
import type { RedisClient } from "../log/index.ts";
import { startProjector, type ProjectorOptions } from "./live.ts";

export interface ProjectorProcessOptions extends Omit<ProjectorOptions, "redis" | "logger"> {
  redis: RedisClient;
  logger: Logger;
  /** Exit code after a clean stop is 0; a second signal during stop exits at once with 130. */
  exit?: (code: number) => void;
}

export async function runProjectorProcess(options: ProjectorProcessOptions): Promise<number> {
  const { logger } = options;
  const projector = startProjector(options);
  logger.info({ version: projector.version, prefix: options.prefix ?? DEFAULT_PREFIX }, "projector started");
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    const on = (s: NodeJS.Signals): void => {
      process.off("SIGTERM", on);
      process.off("SIGINT", on);
      resolve(s);
    };
    process.on("SIGTERM", on);
    process.on("SIGINT", on);
  });
  const again = (): void => (options.exit ?? process.exit)(130);
  process.once("SIGTERM", again);
  process.once("SIGINT", again);
  logger.info({ signal }, "projector stopping");
  await projector.stop();
  process.off("SIGTERM", again);
  process.off("SIGINT", again);
  logger.info({ ...projector.stats }, "projector stopped");
  return 0;
}
