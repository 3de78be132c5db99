// `turnstream model-server --script FILE [--port N]`: the scripted Messages API double on loopback.
import { readFileSync } from "node:fs";
import { InvalidScriptError, startModelServer } from "../../testing/index.ts";
import { parseCommandArgs } from "./_args.ts";

export const summary = "serve a scripted Anthropic Messages API on 127.0.0.1 for offline CLI runs";

export async function run(argv: string[]): Promise<number> {
  const usage = `usage: turnstream model-server --script FILE [--port N]
  Serves the Anthropic Messages API on 127.0.0.1 from a script of answers (format: src/testing/README.md),
  prints "listening on <url>" and serves until SIGINT or SIGTERM.
  A worker whose model it is: ANTHROPIC_BASE_URL=<url> ANTHROPIC_API_KEY=<anything>
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 turnstream worker
  --script FILE  the script, JSON: {"responses": [{"content": [{"type": "text", "text": "…"}]}, …]}
  --port N       the port (default 0: a free one)
`;
  const args = parseCommandArgs("model-server", usage, {
    args: argv,
    options: { script: { type: "string" }, port: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  if (typeof args === "number") return args;
  const { values } = args;
  if (values.script === undefined) {
    process.stderr.write(`turnstream model-server: --script FILE is required\n${usage}`);
    return 2;
  }
  const port = values.port === undefined ? 0 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write(`turnstream model-server: --port must be an integer 0-65535, got '${values.port}'\n`);
    return 2;
  }
  let script: unknown;
  try {
    script = JSON.parse(readFileSync(values.script, "utf8"));
  } catch (err) {
    process.stderr.write(`turnstream model-server: cannot read script ${values.script}: ${(err as Error).message}\n`);
    return 2;
  }
  let server: Awaited<ReturnType<typeof startModelServer>>;
  try {
    server = await startModelServer({ script, port });
  } catch (err) {
    if (!(err instanceof InvalidScriptError)) throw err;
    process.stderr.write(`turnstream model-server: ${values.script}: ${err.message}\n`);
    return 2;
  }
  process.stdout.write(`listening on ${server.url}\n`);
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  await server.close();
  return 0;
}
