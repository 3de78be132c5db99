// The CLI's environment, built from a minimal base rather than the host's whole environment: the
// host's process may hold variables meant for it alone (Redis URLs, tokens, turnstream's settings), and
// every one the CLI inherits is readable by the turn's tools. On top of the base come the host's model
// access and CLI settings (unless `isolate`), then the caller's overlay, then colour off.
export type EnvOverlay = Record<string, string | undefined>;

type HostEnv = Readonly<Record<string, string | undefined>>;

/** Host variables every run gets: where programs are, the user's home and temp, the locale. */
const BASE_NAMES: readonly string[] = ["PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "LANGUAGE", "TZ"];
const BASE_PREFIXES: readonly string[] = ["LC_"];

// Model access: the credential, where requests go and the network path there.
const MODEL_ACCESS_NAMES: readonly string[] = [
  "CLAUDE_CODE_OAUTH_TOKEN",
  "CLAUDE_CODE_USE_BEDROCK",
  "CLAUDE_CODE_USE_VERTEX",
  "CLAUDE_CODE_USE_FOUNDRY",
  "CLAUDE_CODE_SKIP_BEDROCK_AUTH",
  "CLAUDE_CODE_SKIP_VERTEX_AUTH",
  "CLAUDE_CODE_SKIP_FOUNDRY_AUTH",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "CLOUD_ML_REGION",
];
// A cloud provider's credentials go only to runs the host points at that provider.
const PROVIDER_PREFIXES: ReadonlyArray<{ switch: string; prefixes: readonly string[] }> = [
  { switch: "CLAUDE_CODE_USE_BEDROCK", prefixes: ["AWS_"] },
  { switch: "CLAUDE_CODE_USE_VERTEX", prefixes: ["GOOGLE_", "GCLOUD_", "VERTEX_REGION_"] },
  { switch: "CLAUDE_CODE_USE_FOUNDRY", prefixes: ["AZURE_"] },
];

const setIn = (env: HostEnv, name: string): boolean => (env[name] ?? "") !== "";
const switchedOn = (env: HostEnv, name: string): boolean =>
  setIn(env, name) && env[name] !== "0" && env[name]!.toLowerCase() !== "false";

function pick(env: HostEnv, keep: (name: string) => boolean): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) if (value !== undefined && keep(name)) picked[name] = value;
  return picked;
}

/** The host variables every run gets, whatever else it is given. */
export function baseEnv(host: HostEnv): Record<string, string> {
  return pick(host, (name) => BASE_NAMES.includes(name) || BASE_PREFIXES.some((p) => name.startsWith(p)));
}

/**
 * The model access a run gets from its host: `ANTHROPIC_*` (base URLs, API key, auth token, headers,
 * models), the OAuth token, the Bedrock/Vertex/Foundry switches with that provider's credentials, and
 * the network settings the host's operator set (proxies, CA files). The one place a run's credential
 * comes from the host.
 */
export function modelAccessEnv(host: HostEnv): Record<string, string> {
  const providers = PROVIDER_PREFIXES.filter((p) => switchedOn(host, p.switch)).flatMap((p) => p.prefixes);
  const isAccess = (name: string): boolean =>
    name.startsWith("ANTHROPIC_") || MODEL_ACCESS_NAMES.includes(name) || providers.some((p) => name.startsWith(p));
  return pick(host, isAccess);
}

/** The host's settings for the CLI itself: `CLAUDE_CODE_*` and `DISABLE_*` tuning, and CLAUDE_CONFIG_DIR. */
export function cliSettingsEnv(host: HostEnv): Record<string, string> {
  const access = modelAccessEnv(host);
  const isSetting = (name: string): boolean =>
    name.startsWith("CLAUDE_CODE_") || name.startsWith("DISABLE_") || name === "CLAUDE_CONFIG_DIR";
  return pick(host, (name) => !(name in access) && isSetting(name));
}

export interface BuildEnvOptions {
  host?: HostEnv;
  overlay?: EnvOverlay | undefined;
  /** Only the base and the overlay: nothing of the host's model access or CLI settings. */
  isolate?: boolean | undefined;
}

export function buildEnv(options: BuildEnvOptions = {}): Record<string, string> {
  const host = options.host ?? process.env;
  const env: Record<string, string> = baseEnv(host);
  if (options.isolate !== true) Object.assign(env, cliSettingsEnv(host), modelAccessEnv(host));
  for (const [name, value] of Object.entries(options.overlay ?? {})) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  env["FORCE_COLOR"] = "0";
  return env;
}

/** Which kind of API authentication an environment carries, if any. */
export function envAuth(
  env: Record<string, string | undefined>,
): "api_key" | "auth_token" | "oauth_token" | "bedrock" | "vertex" | "foundry" | undefined {
  if (setIn(env, "ANTHROPIC_API_KEY")) return "api_key";
  if (setIn(env, "ANTHROPIC_AUTH_TOKEN")) return "auth_token";
  if (setIn(env, "CLAUDE_CODE_OAUTH_TOKEN")) return "oauth_token";
  if (switchedOn(env, "CLAUDE_CODE_USE_BEDROCK")) return "bedrock";
  if (switchedOn(env, "CLAUDE_CODE_USE_VERTEX")) return "vertex";
  if (switchedOn(env, "CLAUDE_CODE_USE_FOUNDRY")) return "foundry";
  return undefined;
}
