// The CLI keeps each conversation in `<config>/projects/<cwd-slug>/<id>.jsonl` and `--resume` only
// looks under the current cwd's slug. Moving that one file is how a session moves between config
// homes, workers and cwds.
import { mkdirSync, readFileSync, writeFileSync, renameSync } from "node:fs";
import { isAbsolute, join } from "node:path";

const SESSION_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** The CLI's project folder name for a cwd: every character that is not an ASCII letter or digit becomes `-`. */
export function projectSlug(cwd: string): string {
  return cwd.replace(/[^A-Za-z0-9]/g, "-");
}

export function sessionFilePath(configDir: string, cwd: string, sessionId: string): string {
  if (!isAbsolute(configDir)) throw new TypeError("configDir must be an absolute path");
  if (!isAbsolute(cwd)) throw new TypeError("cwd must be an absolute path");
  if (!SESSION_ID.test(sessionId)) throw new TypeError("sessionId must be a CLI session id (letters, digits, - and _)");
  return join(configDir, "projects", projectSlug(cwd), `${sessionId}.jsonl`);
}

/** The session file's bytes, or undefined when the CLI wrote none there. */
export function captureSessionFile(configDir: string, cwd: string, sessionId: string): Buffer | undefined {
  try {
    return readFileSync(sessionFilePath(configDir, cwd, sessionId));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/** Writes the session file where `--resume <sessionId>` run in `cwd` with this config dir will find it. */
export function restoreSessionFile(configDir: string, cwd: string, sessionId: string, bytes: Uint8Array): string {
  const path = sessionFilePath(configDir, cwd, sessionId);
  mkdirSync(join(configDir, "projects", projectSlug(cwd)), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, bytes, { mode: 0o600 });
  renameSync(tmp, path);
  return path;
}
