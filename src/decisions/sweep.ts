// Supervised runs' private folders (run file with the bearer token, settings) are removed when the run
// ends; a worker that is SIGKILLed leaves them behind. Each folder's name says which process made it
// (`turnstream-supervised-<pid>.<start time>-XXXXXX`; the start time tells a reused pid apart), so a
// sweep can remove the folders of processes that are gone and leave the live ones alone.
import { lstatSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "../log/index.ts";

export const SUPERVISED_DIR_PREFIX = "turnstream-supervised-";
const OWNED = /^turnstream-supervised-(\d+)(?:\.(\d+))?-[A-Za-z0-9]{6}$/;

/** A process's start time in clock ticks since boot (Linux); throws ENOENT when there is no such process. */
function readStartTime(pid: number): string | undefined {
  const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
  // Fields after the command name (which may hold spaces): state is field 3, starttime field 22.
  return stat.slice(stat.lastIndexOf(") ") + 2).split(" ")[19];
}

function startTimeOf(pid: number): string | undefined {
  try {
    return readStartTime(pid);
  } catch {
    return undefined;
  }
}

let own: string | undefined;

/** `<pid>.<start time>` of this process (just the pid where /proc is missing). */
export function ownerTag(): string {
  if (own === undefined) {
    const start = startTimeOf(process.pid);
    own = start === undefined ? String(process.pid) : `${process.pid}.${start}`;
  }
  return own;
}

/** Whether the folder's owner may still run; when unsure (a /proc we may not read) it counts as alive. */
function isAlive(pid: number, startTime: string | undefined): boolean {
  if (startTime !== undefined) {
    try {
      return readStartTime(pid) === startTime;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code !== "ENOENT";
    }
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

export interface SupervisedSweepOptions {
  /** Where the folders are (default: the OS temp dir, where prepareSupervisedRun puts them). */
  tmpDir?: string;
  logger?: Logger;
}

export interface SupervisedSweepResult {
  removed: string[];
  live: string[];
  failed: string[];
}

/**
 * Removes the supervised-run folders whose owner process is gone. Only this user's directories are
 * touched (never a symlink); folders of live processes, this one included, stay. Never throws.
 */
export function sweepSupervisedDirs(options: SupervisedSweepOptions = {}): SupervisedSweepResult {
  const result: SupervisedSweepResult = { removed: [], live: [], failed: [] };
  const dir = options.tmpDir ?? tmpdir();
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return result;
  }
  const uid = process.getuid?.();
  for (const name of names) {
    const owned = OWNED.exec(name);
    if (owned === null) continue;
    try {
      const st = lstatSync(join(dir, name));
      if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) continue;
      if (isAlive(Number(owned[1]), owned[2])) {
        result.live.push(name);
        continue;
      }
      rmSync(join(dir, name), { recursive: true, force: true });
      result.removed.push(name);
    } catch (err) {
      result.failed.push(name);
      options.logger?.warn(
        { dir: name, err: (err as Error).message },
        "could not remove a dead worker's supervised-run folder",
      );
    }
  }
  return result;
}
