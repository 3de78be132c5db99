// The CLI's environment: host env, the caller's overlay on top (undefined removes a key), colour off.
export type EnvOverlay = Record<string, string | undefined>;

const INHERITED_AUTH_PREFIXES = ["CLAUDE_", "ANTHROPIC_"];

export interface BuildEnvOptions {
  host?: NodeJS.ProcessEnv;
  overlay?: EnvOverlay | undefined;
  /** Drop inherited CLAUDE_* / ANTHROPIC_* so the host's own settings cannot leak into the run. */
  isolate?: boolean | undefined;
}

export function buildEnv(options: BuildEnvOptions = {}): Record<string, string> {
  const host = options.host ?? process.env;
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(host)) {
    if (v === undefined) continue;
    if (options.isolate === true && INHERITED_AUTH_PREFIXES.some((p) => k.startsWith(p))) continue;
    env[k] = v;
  }
  for (const [k, v] of Object.entries(options.overlay ?? {})) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  env["FORCE_COLOR"] = "0";
  return env;
}

/** Which kind of API authentication an environment carries, if any. */
export function envAuth(env: Record<string, string | undefined>): "api_key" | "auth_token" | "oauth_token" | "bedrock" | "vertex" | "foundry" | undefined {
  const set = (k: string): boolean => (env[k] ?? "") !== "";
  const on = (k: string): boolean => set(k) && env[k] !== "0" && env[k]!.toLowerCase() !== "false";
  if (set("ANTHROPIC_API_KEY")) return "api_key";
  if (set("ANTHROPIC_AUTH_TOKEN")) return "auth_token";
  if (set("CLAUDE_CODE_OAUTH_TOKEN")) return "oauth_token";
  if (on("CLAUDE_CODE_USE_BEDROCK")) return "bedrock";
  if (on("CLAUDE_CODE_USE_VERTEX")) return "vertex";
  if (on("CLAUDE_CODE_USE_FOUNDRY")) return "foundry";
  return undefined;
}
