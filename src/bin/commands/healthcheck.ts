// `turnstream healthcheck`: a container health check for images with no HTTP client. With an ops
// port configured (TURNSTREAM_OPS_PORT) it asks the process's own ops server (/readyz, or /healthz
// with --live), which knows more than a Redis ping (shutting down, its instance id taken, a stuck event loop);
// without one it pings the Redis this process is configured for.
import { opsConfigFromEnv, OpsConfigError, type OpsConfig } from "../../ops/index.ts";
import { EXIT } from "../exit-codes.ts";
import { parseCommandArgs } from "./_args.ts";
import { redisOrExplain } from "./_connect.ts";

export const summary =
  "exit 0 when the process's ops server is ready (or, with no ops port, Redis answers), 3 when not: a container health check";

const usage = `usage: turnstream healthcheck [--ready | --live] [--timeout-ms N]
  With TURNSTREAM_OPS_PORT set: GET http://127.0.0.1:<port>/readyz (the default) or /healthz (--live)
  and exit 0 on 200, 3 otherwise. Without it: ping the Redis of REDIS_URL / REDIS_CLUSTER_NODES,
  exit 0 when it answers, 3 when it does not (--ready and --live then exit 2: nothing to ask).
  --ready           ask /readyz: Redis reachable, not shutting down, instance id not taken by another process
  --live            ask /healthz: the event loop is not stuck
  --timeout-ms N    how long to wait for the answer (default 4000)
`;

const DEFAULT_TIMEOUT_MS = 4000;

/**
 * Where the ops server listens, as seen from inside its own container (a wildcard bind is reached on
 * loopback); undefined when no port is configured, a message when the port is not one.
 */
export function opsUrl(path: "/readyz" | "/healthz", env: NodeJS.ProcessEnv = process.env): URL | string | undefined {
  const raw = env["TURNSTREAM_OPS_PORT"]?.trim() ?? "";
  const notAPort = `TURNSTREAM_OPS_PORT=${JSON.stringify(raw.slice(0, 20))} is not a port to ask (1-65535)`;
  // The port as the ops server reads it, but written in digits only, and never 0 (an ephemeral port
  // cannot be known from outside the process).
  if (raw !== "" && !/^\d+$/.test(raw)) return notAPort;
  let config: OpsConfig | undefined;
  try {
    config = opsConfigFromEnv(env);
  } catch (err) {
    if (err instanceof OpsConfigError) return notAPort;
    throw err;
  }
  if (config === undefined) return undefined;
  if (config.port === 0) return notAPort;
  const bind = config.host;
  const host =
    bind === "0.0.0.0" || bind === "::" || bind === "[::]"
      ? "127.0.0.1"
      : bind.includes(":") && !bind.startsWith("[")
        ? `[${bind}]`
        : bind;
  return new URL(`http://${host}:${config.port}${path}`);
}

/** GETs the endpoint: 0 on 200; else 3 with one line saying why (status and the start of the body, or the error). */
export async function probe(url: URL, timeoutMs: number): Promise<{ code: number; reason: string }> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: "manual" });
    const body = (await res.text()).replace(/\s+/g, " ").trim().slice(0, 200);
    if (res.status === 200) return { code: EXIT.finished, reason: `${url.pathname} ok` };
    return {
      code: EXIT.infrastructure,
      reason: `${url.pathname} answered ${res.status}${body === "" ? "" : `: ${body}`}`,
    };
  } catch (err) {
    const failure = err as Error & { cause?: { code?: string; message?: string } };
    const why =
      failure.name === "TimeoutError"
        ? `no answer within ${timeoutMs} ms`
        : (failure.cause?.code ?? failure.cause?.message ?? failure.message);
    return { code: EXIT.infrastructure, reason: `${url.host}${url.pathname} unreachable: ${why}` };
  }
}

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("healthcheck", usage, {
    args: argv,
    options: {
      ready: { type: "boolean" },
      live: { type: "boolean" },
      "timeout-ms": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (typeof args === "number") return args;
  const { values } = args;
  const fail = (msg: string): number => (process.stderr.write(`turnstream healthcheck: ${msg}\n${usage}`), EXIT.usage);
  if (values.ready === true && values.live === true)
    return fail("--ready and --live ask different questions: pass one");
  const timeoutMs = Number(values["timeout-ms"] ?? DEFAULT_TIMEOUT_MS);
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) return fail(`--timeout-ms must be a positive whole number of ms`);
  const url = opsUrl(values.live === true ? "/healthz" : "/readyz");
  if (typeof url === "string") return fail(url);
  if (url === undefined) {
    // Asked explicitly for the ops server: a missing port is a configuration error, not "healthy".
    if (values.ready === true || values.live === true)
      return fail("TURNSTREAM_OPS_PORT is not set: no ops server to ask");
    const redis = await redisOrExplain("healthcheck");
    if (redis === undefined) return EXIT.infrastructure;
    redis.disconnect();
    return EXIT.finished;
  }
  const { code, reason } = await probe(url, timeoutMs);
  (code === EXIT.finished ? process.stdout : process.stderr).write(`turnstream healthcheck: ${reason}\n`);
  return code;
}
