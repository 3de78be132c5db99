// Which `claude` to run: option → CLAUDE_BIN → the pinned package's binary → `claude` on PATH.
import { accessSync, constants, statSync } from "node:fs";
import { createRequire } from "node:module";
import { delimiter, dirname, isAbsolute, join, resolve } from "node:path";
import { CliNotFoundError } from "./errors.ts";

function executable(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

// Resolved once: where an installed package lives does not change while the process runs, and the
// module resolution behind it is not worth repeating on every run.
let pinned: { path: string | undefined } | undefined;

function pinnedPackageBin(): string | undefined {
  pinned ??= { path: lookUpPinnedPackageBin() };
  return pinned.path;
}

function lookUpPinnedPackageBin(): string | undefined {
  try {
    const req = createRequire(import.meta.url);
    const pkgJson = req.resolve("@anthropic-ai/claude-code/package.json");
    const pkg = req(pkgJson) as { bin?: string | Record<string, string> };
    const rel = typeof pkg.bin === "string" ? pkg.bin : pkg.bin?.["claude"];
    return rel === undefined ? undefined : join(dirname(pkgJson), rel);
  } catch {
    return undefined;
  }
}

function onPath(name: string, pathVar: string | undefined): string | undefined {
  for (const dir of (pathVar ?? "").split(delimiter)) {
    if (dir === "") continue;
    const candidate = join(dir, name);
    if (executable(candidate)) return candidate;
  }
  return undefined;
}

export interface ResolveBinOptions {
  claudeBin?: string | undefined;
  /** The host's own environment (default process.env), never a run's: an overlay must not pick the program. */
  env?: Record<string, string | undefined>;
  cwd?: string;
}

/**
 * The `claude` binary a run uses: the option, else `CLAUDE_BIN`, else the pinned `@anthropic-ai/claude-code`, else
 * `claude` on PATH.
 */
export function resolveClaudeBin(options: ResolveBinOptions = {}): string {
  const env = options.env ?? process.env;
  const explicit = (label: string, value: string): string => {
    const path =
      isAbsolute(value) || value.includes("/")
        ? resolve(options.cwd ?? process.cwd(), value)
        : onPath(value, env["PATH"]);
    if (path !== undefined && executable(path)) return path;
    throw new CliNotFoundError([`${label}=${value}`]);
  };
  if (options.claudeBin !== undefined) return explicit("claudeBin", options.claudeBin);
  const fromEnv = env["CLAUDE_BIN"];
  if (fromEnv !== undefined && fromEnv !== "") return explicit("CLAUDE_BIN", fromEnv);
  const tried = ["claudeBin option (unset)", "CLAUDE_BIN (unset)"];
  const pinned = pinnedPackageBin();
  if (pinned !== undefined && executable(pinned)) return pinned;
  tried.push(`@anthropic-ai/claude-code${pinned === undefined ? " (not installed)" : ` (${pinned} not executable)`}`);
  const path = onPath("claude", env["PATH"]);
  if (path !== undefined) return path;
  tried.push("claude on PATH");
  throw new CliNotFoundError(tried);
}
