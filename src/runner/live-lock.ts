// Lock files that say "this process holds that": a run's config home, a worker's instance id. Each
// names its process by pid, start time (a reused pid is told apart) and host, so a sweep can remove
// what a dead process left and never what a live one holds. The one liveness rule for both.
import { readFileSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { processStartTime } from "./process-tree.ts";

export interface LockContent {
  pid: number;
  start: string | undefined;
  /** The host the process ran on: another host's processes cannot be checked from here. */
  host?: string | undefined;
  createdAt: string;
  runId?: string | undefined;
}

/**
 * `live`: the owner runs, or it cannot be told (a half-written or unreadable lock, another host's);
 * `dead`: the owner provably ended; `none`: no lock, or one naming no process.
 */
export type LockState = "live" | "dead" | "none";

let own: { start: string | undefined; host: string } | undefined;

/** This process's start time and host; neither changes, so they are read once. */
function ownProcess(): { start: string | undefined; host: string } {
  return (own ??= { start: processStartTime(process.pid), host: hostname() });
}

/** This process's lock content. */
export function ownLockContent(extra: { runId?: string } = {}): LockContent {
  const { start, host } = ownProcess();
  return { pid: process.pid, start, host, createdAt: new Date().toISOString(), ...extra };
}

/** Creates the lock file; never replaces one (EEXIST). */
export function writeLock(path: string, content: LockContent): void {
  writeFileSync(path, JSON.stringify(content), { mode: 0o600, flag: "wx" });
}

/** Reads a lock: its content, or `missing`, or `unreadable` (half-written or not ours to read). */
export function readLock(path: string): LockContent | "missing" | "unreadable" {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as LockContent;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT" ? "missing" : "unreadable";
  }
}

/** Whether the process a lock names runs. Where /proc cannot tell, a signal 0 does; when unsure, it runs. */
export function processIsLive(pid: number, start: string | undefined): boolean {
  const now = processStartTime(pid);
  if (now !== undefined) return start === undefined || now === start;
  // /proc answers for this process, so it would have for that one: it is gone.
  if (ownProcess().start !== undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== "ESRCH";
  }
}

/** The state of the lock at `path` (see LockState). */
export function lockState(path: string): LockState {
  const lock = readLock(path);
  if (lock === "missing") return "none";
  if (lock === "unreadable" || typeof lock !== "object" || lock === null) return "live";
  if (!Number.isInteger(lock.pid) || lock.pid <= 0) return "none";
  if (typeof lock.host === "string" && lock.host !== ownProcess().host) return "live";
  return processIsLive(lock.pid, lock.start) ? "live" : "dead";
}
