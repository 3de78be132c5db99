// The worker's model credential, as the gateway holds it: read from the worker's environment (an API
// key, an auth token, an OAuth token) or the operator's credentials file, and put on upstream
// requests only. A run never sees it; policies and events see only its fingerprint.
import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";

export type CredentialKind = "api_key" | "auth_token" | "oauth";

/** The beta the CLI adds to every API request it makes with an OAuth access token. */
export const OAUTH_BETA = "oauth-2025-04-20";

export interface Credential {
  readonly kind: CredentialKind;
  /** Where it was read: the variable's name or the credentials file's path. */
  readonly source: string;
  /** A short digest naming the credential (for policies and events) without holding it. */
  fingerprint(): string;
  /** The headers that carry it upstream, read anew each time (an operator's login may refresh the file). */
  headers(): Record<string, string>;
}

/** Providers whose requests are signed by the cloud's own credentials: the gateway cannot broker them. */
export const UNBROKERABLE_PROVIDERS: Readonly<Record<string, string>> = {
  CLAUDE_CODE_USE_BEDROCK: "Amazon Bedrock",
  CLAUDE_CODE_USE_VERTEX: "Google Vertex AI",
  CLAUDE_CODE_USE_FOUNDRY: "Microsoft Foundry",
};

type Env = Readonly<Record<string, string | undefined>>;

const isOn = (v: string | undefined): boolean =>
  v !== undefined && v !== "" && v !== "0" && v.toLowerCase() !== "false";

/** The variable that turns on a provider the gateway cannot broker, if the env sets one. */
export function unbrokerableProvider(env: Env): string | undefined {
  return Object.keys(UNBROKERABLE_PROVIDERS).find((name) => isOn(env[name]));
}

const digest = (value: string): string => createHash("sha256").update(value).digest("hex").slice(0, 16);

function fromValue(kind: CredentialKind, source: string, value: string): Credential {
  const headers: Record<string, string> =
    kind === "api_key" ? { "x-api-key": value } : { authorization: `Bearer ${value}` };
  return { kind, source, fingerprint: () => digest(value), headers: () => ({ ...headers }) };
}

/** The OAuth access token of a CLI credentials file (`claudeAiOauth.accessToken`), if it holds one. */
export function oauthAccessToken(text: string): string | undefined {
  try {
    const token = (JSON.parse(text) as { claudeAiOauth?: { accessToken?: unknown } }).claudeAiOauth?.accessToken;
    return typeof token === "string" && token !== "" ? token : undefined;
  } catch {
    return undefined;
  }
}

/** The operator's credentials file, read again only when it changed (the operator's own login refreshes it). */
function fromFile(path: string, first: string): Credential {
  let cached = { mtimeMs: statSync(path).mtimeMs, token: first };
  const current = (): string => {
    try {
      const mtimeMs = statSync(path).mtimeMs;
      if (mtimeMs !== cached.mtimeMs)
        cached = { mtimeMs, token: oauthAccessToken(readFileSync(path, "utf8")) ?? cached.token };
    } catch {
      // Gone or unreadable for a moment: the last token read is the best there is.
    }
    return cached.token;
  };
  return {
    kind: "oauth",
    source: path,
    fingerprint: () => digest(current()),
    headers: () => ({ authorization: `Bearer ${current()}` }),
  };
}

/**
 * The credential a CLI started with `env` would use, in the CLI's order (API key, auth token, OAuth
 * token variable), else the OAuth token of the credentials file at `credentialsFile`.
 */
export function credentialFrom(env: Env, credentialsFile: string | undefined): Credential | undefined {
  const set = (name: string): string | undefined =>
    env[name] !== undefined && env[name] !== "" ? env[name] : undefined;
  const apiKey = set("ANTHROPIC_API_KEY");
  if (apiKey !== undefined) return fromValue("api_key", "ANTHROPIC_API_KEY", apiKey);
  const authToken = set("ANTHROPIC_AUTH_TOKEN");
  if (authToken !== undefined) return fromValue("auth_token", "ANTHROPIC_AUTH_TOKEN", authToken);
  const oauthToken = set("CLAUDE_CODE_OAUTH_TOKEN");
  if (oauthToken !== undefined) return fromValue("oauth", "CLAUDE_CODE_OAUTH_TOKEN", oauthToken);
  if (credentialsFile === undefined) return undefined;
  try {
    const token = oauthAccessToken(readFileSync(credentialsFile, "utf8"));
    return token === undefined ? undefined : fromFile(credentialsFile, token);
  } catch {
    return undefined;
  }
}

/** The worker's upstream base URL: its ANTHROPIC_BASE_URL, else the real API. */
export function upstreamBaseUrl(env: Env): URL {
  const base = env["ANTHROPIC_BASE_URL"];
  return new URL(base !== undefined && base !== "" ? base : "https://api.anthropic.com");
}
