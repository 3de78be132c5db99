// A fresh config dir makes the CLI do its first-start work on every run: migrations, an install
// id, the builtin plugins' bookkeeping: a noticeable share of a short turn's CPU that a dir the CLI
// had used before does not cost. So per instance and process, the install state the first run's CLI
// wrote to `.claude.json` becomes the seed of every later home. Only the keys below are carried: the
// file may also hold per-project state, and that must not pass from one run to the next.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const CONFIG_FILE = ".claude.json";

/** Install-level keys of `.claude.json` (no project, session or user data). */
export const SEED_KEYS: readonly string[] = [
  "firstStartTime",
  "firstStartVersion",
  "machineID",
  "userID",
  "migrationVersion",
  "opusProMigrationComplete",
  "hasResetAutoModeOptInForDefaultOffer",
  "seenNotifications",
  "pluginUsage",
];

// Kept in memory only: a worker that restarts after a CLI upgrade learns a seed from the new CLI.
const seeds = new Map<string, string>();

/** Writes the instance's seed (if one was learnt) as the new home's `.claude.json`. */
export function seedConfigHome(instanceDir: string, homeDir: string): void {
  const seed = seeds.get(instanceDir);
  if (seed !== undefined) writeFileSync(join(homeDir, CONFIG_FILE), seed, { mode: 0o600, flag: "wx" });
}

/** Learns the instance's seed from a home the CLI has used, unless it has one. Never throws. */
export function learnConfigSeed(instanceDir: string, homeDir: string): void {
  if (seeds.has(instanceDir)) return;
  try {
    const written = JSON.parse(readFileSync(join(homeDir, CONFIG_FILE), "utf8")) as Record<string, unknown>;
    if (written === null || typeof written !== "object" || typeof written["migrationVersion"] !== "number") return;
    const seed = Object.fromEntries(SEED_KEYS.filter((k) => k in written).map((k) => [k, written[k]]));
    seeds.set(instanceDir, JSON.stringify(seed));
  } catch {
    // no file yet (the CLI never started) or not JSON: learn from a later run
  }
}
