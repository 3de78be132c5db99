// doctor's gateway line: whether a worker started here would broker its runs' model access (the
// default) or pass the credential through, which credential the gateway would hold (by kind and
// source, never its value), and one request through a loopback gateway to the upstream
// (count_tokens: no model answer, no cost) to show the gateway can reach it with that credential.
import { join } from "node:path";
import { CREDENTIALS_FILE, envAuth, operatorConfigDir, type CheckResult } from "../../runner/index.ts";
import {
  credentialFrom,
  startGateway,
  unbrokerableProvider,
  upstreamBaseUrl,
  UNBROKERABLE_PROVIDERS,
  type Credential,
} from "../../gateway/index.ts";

type Env = Record<string, string | undefined>;

const PROBE_TIMEOUT_MS = 15_000;

/** One request through a gateway holding `credential`: the upstream's status, or why it was not reached. */
async function throughGateway(
  env: Env,
  credential: Credential,
): Promise<{ status: number; type?: string } | { error: string }> {
  const gateway = await startGateway();
  const grant = gateway.issue(
    { baseUrl: upstreamBaseUrl(env), credential },
    { binding: { session: "doctor" }, onCall: () => undefined },
  );
  try {
    const res = await fetch(`${gateway.url}/v1/messages/count_tokens`, {
      method: "POST",
      headers: { "x-api-key": grant.token, "content-type": "application/json", "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ model: "claude-sonnet-4-5", messages: [{ role: "user", content: "hello" }] }),
      signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
    });
    const body = (await res.json().catch(() => ({}))) as { error?: { type?: string } };
    return { status: res.status, type: body.error?.type };
  } catch (err) {
    return { error: (err as Error).message };
  } finally {
    await gateway.close();
  }
}

function passthroughCheck(env: Env): CheckResult {
  const held = envAuth(env) ?? "the operator's credential file (copied into each run's home)";
  return {
    name: "gateway",
    status: "warn",
    detail: `passthrough (TURNSTREAM_GATEWAY=passthrough): brokering is off; each run holds the worker's credential (${held.replace("_", " ")}) and any process of a run can read it`,
  };
}

/** The gateway line of `turnstream doctor`, for a worker started with `env`. */
export async function gatewayCheck(env: Env): Promise<CheckResult> {
  const fail = (detail: string): CheckResult => ({ name: "gateway", status: "fail", detail });
  if (env["TURNSTREAM_GATEWAY"] === "passthrough") return passthroughCheck(env);
  const provider = unbrokerableProvider(env);
  if (provider !== undefined) {
    return fail(
      `${provider} is set: ${UNBROKERABLE_PROVIDERS[provider]} cannot be brokered, so a worker refuses to start; set TURNSTREAM_GATEWAY=passthrough to run it with each run holding the cloud credentials`,
    );
  }
  const credential = credentialFrom(env, join(operatorConfigDir(env), CREDENTIALS_FILE));
  if (credential === undefined)
    return fail("brokering is on but there is no credential for the gateway to hold (see the auth line)");
  const upstream = upstreamBaseUrl(env).origin;
  const held = `the gateway holds the ${credential.kind.replace("_", " ")} from ${credential.source}; runs get a token of their own`;
  const reached = await throughGateway(env, credential);
  if ("error" in reached)
    return fail(`brokering is on (${held}), but ${upstream} could not be reached through it: ${reached.error}`);
  if (reached.status === 401 || reached.status === 403)
    return fail(
      `brokering is on (${held}), but ${upstream} refused that credential (${reached.status} ${reached.type ?? ""})`,
    );
  const status = reached.status >= 500 ? "warn" : "pass";
  return {
    name: "gateway",
    status,
    detail: `brokering on: ${held}; a request through a loopback gateway reached ${upstream} (status ${reached.status})`,
  };
}
