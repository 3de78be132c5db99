// The CLI keeps each conversation in `<config>/projects/<cwd-slug>/<id>.jsonl` and `--resume` only
// looks under the current cwd's slug. Moving that one file is how a session moves between config
// homes, workers and cwds.
import { mkdirSync, readFileSync, writeFileSync, renameSync } from "node:fs";
import { isAbsolute, join } from "node:path";

const SESSION_ID = /^[A-Za-z0-9_-]{1,128}$/;

const MAX_SLUG = 200;

/**
 * The CLI's project folder name for a cwd (as the CLI derives it): every UTF-16 code unit that is
 * not an ASCII letter or digit becomes `-`; a result longer than 200 characters is cut to 200 and
 * gets `-<hash>` appended, the hash being the 32-bit `h = h*31 + code` of the whole cwd, absolute
 * value, base 36.
 */
export function projectSlug(cwd: string): string {
  const slug = cwd.replace(/[^A-Za-z0-9]/g, "-");
  if (slug.length <= MAX_SLUG) return slug;
  let hash = 0;
  for (let index = 0; index < cwd.length; index++) hash = ((hash << 5) - hash + cwd.charCodeAt(index)) | 0;
  return `${slug.slice(0, MAX_SLUG)}-${Math.abs(hash).toString(36)}`;
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
