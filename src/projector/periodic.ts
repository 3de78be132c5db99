// Work a projector process does besides projecting, once every period: retention is one (src/archive
// wires it at the entry points, since the archive imports the projector and not the other way). One
// run at a time, each logged with what it returned; a stop waits for a run in progress only so long.
import { errorFields, type Logger } from "../kernel/index.ts";

export interface PeriodicTask {
  /** For the log lines. */
  name: string;
  everyMs: number;
  /** One run; what it resolves to is logged. */
  run(): Promise<Record<string, unknown>>;
  /** Releases what the task holds (its archive, its queue), after the last run. */
  close?(): Promise<void>;
}

/** How long a stop waits for a run in progress: each step of a run is safe to stop between. */
export const PERIODIC_STOP_WAIT_MS = 10_000;

export interface RunningPeriodic {
  stop(): Promise<void>;
}

export function startPeriodic(task: PeriodicTask, logger: Logger, stopWaitMs = PERIODIC_STOP_WAIT_MS): RunningPeriodic {
  let stopped = false;
  let running: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  const once = async (): Promise<void> => {
    const started = Date.now();
    try {
      const outcome = await task.run();
      logger.info({ task: task.name, ms: Date.now() - started, ...outcome }, `${task.name} ran`);
    } catch (err) {
      logger.error(
        { task: task.name, ...errorFields(err) },
        `${task.name} failed; it runs again in ${task.everyMs} ms`,
      );
    }
  };
  const schedule = (): void => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = once().finally(() => {
        running = undefined;
        schedule();
      });
    }, task.everyMs);
    timer.unref();
  };
  schedule();
  logger.info({ task: task.name, everyMs: task.everyMs }, `${task.name} every ${task.everyMs} ms`);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      if (running !== undefined) {
        let waited: NodeJS.Timeout | undefined;
        const late = new Promise<"late">((resolve) => (waited = setTimeout(() => resolve("late"), stopWaitMs)));
        if ((await Promise.race([running.then(() => "done" as const), late])) === "late")
          logger.warn({ task: task.name, waitedMs: stopWaitMs }, `${task.name} still running; stopping without it`);
        clearTimeout(waited);
      }
      await task
        .close?.()
        .catch((err: unknown) => logger.warn({ task: task.name, ...errorFields(err) }, "close failed"));
    },
  };
}
