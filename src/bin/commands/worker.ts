// `turnstream worker [--concurrency N]`: runs a turn worker until SIGTERM/SIGINT. The rest of its
// configuration comes from the environment (see src/worker/config.ts).
import { parseArgs } from "node:util";
import { PortInUseError } from "../../kernel/index.ts";
import { connectForCommand, RedisUnavailableError } from "../../projector/index.ts";
import { EXIT } from "../exit-codes.ts";
import { runWorkerMain } from "../../worker/index.ts";

export const summary = "run a turn worker (env: REDIS_URL, TURNSTREAM_WORKSPACE_ROOTS, …) until SIGTERM/SIGINT";

const usage =
  "usage: turnstream worker [--concurrency N] [--grace-ms MS] [--ops-port PORT]\n" +
  "  --ops-port PORT  serve /metrics, /healthz and /readyz on PORT (0: a free one, logged); default TURNSTREAM_OPS_PORT, else none\n" +
  "env: REDIS_URL or REDIS_CLUSTER_NODES, TURNSTREAM_WORKSPACE_ROOTS (colon-separated, required),\n" +
  "     TURNSTREAM_CONCURRENCY, TURNSTREAM_INSTANCE_ROOT, TURNSTREAM_SANDBOXED, ANTHROPIC_* (passed to the CLI)\n";

export async function run(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        concurrency: { type: "string" },
        "grace-ms": { type: "string" },
        "ops-port": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (err) {
    process.stderr.write(`turnstream worker: ${err instanceof Error ? err.message : String(err)}\n${usage}`);
    return 2;
  }
  if (parsed.values.help === true) {
    process.stdout.write(usage);
    return 0;
  }
  const num = (text: string | undefined, name: string, min: number): number | undefined => {
    if (text === undefined) return undefined;
    const parsed = Number(text);
    if (!Number.isInteger(parsed) || parsed < min) throw new Error(`--${name} must be an integer ≥ ${min}`);
    return parsed;
  };
  try {
    const concurrency = num(parsed.values.concurrency, "concurrency", 1);
    const graceMs = num(parsed.values["grace-ms"], "grace-ms", 0);
    // One bounded ping first: a worker started against a Redis that is not there says so and exits
    // 3 (the dispatcher's infrastructure code) instead of retrying silently forever.
    (await connectForCommand()).disconnect();
    const code = await runWorkerMain({ concurrency, graceMs, opsPort: parsed.values["ops-port"] });
    // Shutdown is bounded; a handle some library leaves behind (a reconnect timer to a Redis that is
    // gone) must not keep a stopped worker alive. Unref'd: a clean exit does not wait for it.
    setTimeout(() => process.exit(code), 2000).unref();
    return code;
  } catch (err) {
    const message =
      err instanceof PortInUseError
        ? opsPortTaken(err, parsed.values["ops-port"] !== undefined)
        : err instanceof Error
          ? err.message
          : String(err);
    process.stderr.write(`turnstream worker: ${message}\n`);
    return err instanceof RedisUnavailableError ? EXIT.infrastructure : EXIT.usage;
  }
}

/** The ops endpoint's port is taken: which port, and the setting that chose it. */
function opsPortTaken(err: PortInUseError, byFlag: boolean): string {
  const setting = byFlag ? "--ops-port" : "TURNSTREAM_OPS_PORT";
  return (
    `the ops endpoint cannot listen: ${err.message} (${setting}); ` +
    `pick a free port with ${setting} N (0 picks one and logs it), or stop what holds ${err.port}`
  );
}
