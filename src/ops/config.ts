// Where the ops endpoint listens, from TURNSTREAM_OPS_PORT / TURNSTREAM_OPS_HOST or a command's
// --ops-port. Unset means no server: a process that nobody probes opens no port.
import { TurnstreamError } from "../kernel/index.ts";
export interface OpsConfig {
  readonly port: number;
  readonly host: string;
}

export class OpsConfigError extends TurnstreamError {
  readonly variable: string;
  constructor(variable: string, message: string) {
    super(message, { code: "ops_config" });
    this.variable = variable;
  }
}

/** A port number as written: an integer 0…65535 (0: pick a free one). */
function parseOpsPort(text: string, source: string): number {
  const port = Number(text.trim());
  if (text.trim() === "" || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new OpsConfigError(source, `${source} must be a port number 0-65535 (0 picks a free port), got '${text}'`);
  }
  return port;
}

/**
 * The ops endpoint's address, or undefined when none is configured. `portFlag` (--ops-port) wins over the environment.
 */
export function opsConfigFromEnv(
  env: Readonly<Record<string, string | undefined>>,
  portFlag?: string,
): OpsConfig | undefined {
  const fromEnv = env["TURNSTREAM_OPS_PORT"];
  const port =
    portFlag !== undefined
      ? parseOpsPort(portFlag, "--ops-port")
      : fromEnv !== undefined && fromEnv.trim() !== ""
        ? parseOpsPort(fromEnv, "TURNSTREAM_OPS_PORT")
        : undefined;
  if (port === undefined) return undefined;
  const host = env["TURNSTREAM_OPS_HOST"]?.trim();
  return { port, host: host === undefined || host === "" ? "127.0.0.1" : host };
}
