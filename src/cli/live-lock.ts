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

let ownStart: string | undefined;

/** This process's lock content; its start time never changes, so it is read once. */
export function ownLockContent(extra: { runId?: string } = {}): LockContent {
  ownStart ??= processStartTime(process.pid);
  return { pid: process.pid, start: ownStart, host: hostname(), createdAt: new Date().toISOString(), ...extra };
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
  if (processStartTime(process.pid) !== undefined) return false;
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
  if (typeof lock.host === "string" && lock.host !== hostname()) return "live";
  return processIsLive(lock.pid, lock.start) ? "live" : "dead";
}
