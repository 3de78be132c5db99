// A hermetic environment for one CLI run against the model server: private config, temp and runtime
// directories (so nothing lands in the shared system temp dir or the operator's ~/.claude), the base URL,
// a dummy key, no non-essential traffic and few retries so API failures surface in seconds.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

export interface HermeticEnvOptions {
  /** The model server's URL; left out when each run names its own (a turn's env overlay). */
  baseUrl?: string | undefined;
  /** Parent directory for the run's folders (a fresh temp dir by default). */
  root?: string | undefined;
  /**
   * `CLAUDE_CODE_MAX_RETRIES` (default 0): 0 makes a 429/529 final on the first answer; each retry
   * waits the CLI's own backoff or `retry-after`, the longer (a `retry-after` over 60 s ends the run).
   */
  maxRetries?: number | undefined;
  /** Sets `IS_SANDBOX=1`, which `--dangerously-skip-permissions` needs as root. */
  sandboxed?: boolean | undefined;
  /** `ANTHROPIC_API_KEY` for the run (default a dummy the model server accepts). */
  apiKey?: string | undefined;
}

export interface HermeticEnv {
  /** Variables to lay over the host environment. */
  env: Record<string, string>;
  dirs: { root: string; config: string; tmp: string; runtime: string; home: string };
  cleanup(): void;
}

export const DUMMY_API_KEY = "sk-ant-scripted-model-server-dummy";

/**
 * Environment for one CLI run against the model server: its own config, home, temp and runtime directories, the base
 * URL and a dummy key.
 */
export function hermeticEnv(options: HermeticEnvOptions): HermeticEnv {
  const root = options.root ?? mkdtempSync(join(tmpdir(), "turnstream-cli-"));
  const dirs = {
    root,
    config: join(root, "config"),
    tmp: join(root, "tmp"),
    runtime: join(root, "runtime"),
    home: join(root, "home"),
  };
  for (const dir of [dirs.config, dirs.tmp, dirs.runtime, dirs.home]) mkdirSync(dir, { recursive: true, mode: 0o700 });
  const env: Record<string, string> = {
    HOME: dirs.home,
    CLAUDE_CONFIG_DIR: dirs.config,
    TMPDIR: dirs.tmp,
    CLAUDE_CODE_TMPDIR: dirs.tmp,
    XDG_RUNTIME_DIR: dirs.runtime,
    ANTHROPIC_API_KEY: options.apiKey ?? DUMMY_API_KEY,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    CLAUDE_CODE_MAX_RETRIES: String(options.maxRetries ?? 0),
    DISABLE_AUTOUPDATER: "1",
    FORCE_COLOR: "0",
  };
  if (options.baseUrl !== undefined) env.ANTHROPIC_BASE_URL = options.baseUrl;
  if (options.sandboxed) env.IS_SANDBOX = "1";
  return {
    env,
    dirs,
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

/** The pinned `@anthropic-ai/claude-code` binary, else `claude` from PATH. */
export function pinnedClaudeBin(): string {
  try {
    const require = createRequire(import.meta.url);
    const bin = join(dirname(require.resolve("@anthropic-ai/claude-code/package.json")), "bin", "claude.exe");
    if (existsSync(bin)) return bin;
    return "claude";
  } catch {
    return "claude";
  }
}
