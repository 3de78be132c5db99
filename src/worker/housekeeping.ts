// What a worker process does besides turns: it holds its instance id for as long as it lives, and
// removes what dead runs left behind (config homes with credential copies, supervised-run folders
// with bearer tokens, run cgroups) when it starts and every few minutes after. Only leftovers whose
// owner provably ended are removed; a live run's are never touched, whichever instance it belongs to.
import {
  claimInstanceSlot,
  defaultInstanceRoot,
  sweepCgroups,
  sweepConfigHomes,
  type InstanceSlot,
} from "../runner/index.ts";
import { sweepSupervisedDirs } from "../decisions/index.ts";
import type { Logger } from "../kernel/index.ts";

/** Default period of the periodic sweep. */
export const DEFAULT_SWEEP_INTERVAL_MS = 5 * 60 * 1000;

export interface Housekeeping {
  /** The id this worker holds (TURNSTREAM_INSTANCE_ID's, or the lowest free `worker-<host>-<n>`). */
  readonly instanceId: string;
  readonly instanceRoot: string;
  /** Stops the periodic sweep and gives the instance id up. Never throws. */
  stop(): void;
}

export interface HousekeepingOptions {
  instanceId?: string | undefined;
  instanceRoot?: string | undefined;
  /** 0: only the sweep at start. */
  sweepIntervalMs: number;
  logger: Logger;
  env?: Readonly<Record<string, string | undefined>>;
}

export interface SweepCounts {
  configHomes: number;
  staleLocks: number;
  trash: number;
  supervisedDirs: number;
  cgroups: number;
  /** Homes kept because their run is live, or may be being made. */
  kept: number;
}

/**
 * One sweep of this instance's leftovers and of dead processes' supervised folders and cgroups. Logs counts, never
 * paths.
 */
export function sweepOnce(instanceId: string, instanceRoot: string, logger: Logger): SweepCounts | undefined {
  try {
    return sweepAndLog(instanceId, instanceRoot, logger);
  } catch (err) {
    // A sweep runs from a timer: it must never take the worker down.
    logger.warn({ instance: instanceId, err: { message: (err as Error).message } }, "sweep failed");
    return undefined;
  }
}

function sweepAndLog(instanceId: string, instanceRoot: string, logger: Logger): SweepCounts {
  const homes = sweepConfigHomes({ instanceId, instanceRoot, logger });
  const counts: SweepCounts = {
    configHomes: homes.removed.length,
    staleLocks: homes.staleLocks,
    trash: homes.trash,
    supervisedDirs: sweepSupervisedDirs({ logger }).removed.length,
    cgroups: sweepCgroups({ logger }).removed.length,
    kept: homes.live.length + homes.young.length,
  };
  const removed = counts.configHomes + counts.staleLocks + counts.trash + counts.supervisedDirs + counts.cgroups;
  if (removed > 0) logger.info({ instance: instanceId, ...counts }, "swept what dead runs left behind");
  else logger.debug({ instance: instanceId, kept: counts.kept }, "sweep found nothing to remove");
  return counts;
}

/** Takes the instance id, sweeps once, and keeps sweeping every sweepIntervalMs until stop. */
export async function startHousekeeping(options: HousekeepingOptions): Promise<Housekeeping> {
  const { logger } = options;
  const instanceRoot = options.instanceRoot ?? defaultInstanceRoot(options.env);
  const slot: InstanceSlot = await claimInstanceSlot({ instanceRoot, instanceId: options.instanceId });
  const { instanceId } = slot;
  sweepOnce(instanceId, instanceRoot, logger);
  // Unref'd: a sweep due never keeps a stopping worker alive.
  const timer =
    options.sweepIntervalMs > 0
      ? setInterval(() => sweepOnce(instanceId, instanceRoot, logger), options.sweepIntervalMs).unref()
      : undefined;
  let stopped = false;
  return {
    instanceId,
    instanceRoot,
    stop() {
      if (stopped) return;
      stopped = true;
      if (timer !== undefined) clearInterval(timer);
      slot.release();
    },
  };
}
