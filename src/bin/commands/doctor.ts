// `turnstream doctor [--cwd DIR]`: is this machine ready to run turns? One line per check.
import { resolve } from "node:path";
import { runChecks, type CheckResult } from "../../runner/index.ts";
import { EXIT } from "../exit-codes.ts";
import { parseCommandArgs } from "./_args.ts";
import { gatewayCheck } from "./_gateway-check.ts";
import { limitChecks } from "./_limits.ts";

export const summary =
  "check the claude CLI, the cwd, auth, process containment, the tool sandbox, a live stream-json probe turn, the model gateway and each run limit";

const USAGE = `usage: turnstream doctor [--cwd DIR] [--claude-bin PATH] [--timeout-ms N] [--json]

Checks: the claude CLI is found and runs (version); the cwd is absolute and creatable; API auth is
available (API key or auth token in the environment, or a subscription credential); how a run's
processes are contained (cgroup-v2, cgroup-v1-freezer, pid-namespace, or proc-walk, which warns:
a process that leaves the run's session and drops TURNSTREAM_TREE can outlive its turn; run doctor
as the user the worker runs as); the tool sandbox works (bwrap and socat on PATH, and a bwrap run with
no network starts; untrusted turns need it unless TURNSTREAM_TOOL_SANDBOX=off); a live probe turn
("Respond with hello.") through stream-json finishes within the limit (default 45 s); the model
gateway: whether a worker started with this environment brokers its runs' model access
(TURNSTREAM_GATEWAY=broker, the default: runs get a token, never the credential) or passes the
credential through (passthrough: a warning), which credential the gateway would hold, and one
count_tokens request through a loopback gateway to the upstream; then one \`limit\` line per run limit
(pids, memory, cpu, disk, duration): the value a worker with this environment applies
(TURNSTREAM_MAX_PIDS, …) and how this host enforces it (a cgroup, turnstream watching the run, or not
at all: a warning).
--json prints one JSON object ({ ok, checks: [{ name, status, detail }] }) instead of the lines.
Exits 3 when a check fails: this machine is not ready to run turns (infrastructure, not the task).
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("doctor", USAGE, {
    args: argv,
    options: {
      cwd: { type: "string" },
      "claude-bin": { type: "string" },
      "timeout-ms": { type: "string" },
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (typeof args === "number") return args;
  const { values } = args;
  const timeout = values["timeout-ms"] === undefined ? undefined : Number(values["timeout-ms"]);
  if (timeout !== undefined && (!Number.isInteger(timeout) || timeout <= 0)) {
    process.stderr.write("turnstream doctor: --timeout-ms must be a positive integer\n");
    return 2;
  }
  // A relative --cwd is reported as such (the CLI needs an absolute one); no --cwd means here.
  const cwd = values.cwd ?? resolve(process.cwd());
  const printLine = (r: CheckResult): void =>
    void process.stdout.write(`${r.status.padEnd(4)}  ${r.name.padEnd(7)}  ${r.detail}\n`);
  const results = await runChecks(
    { cwd, claudeBin: values["claude-bin"], probeTimeoutMs: timeout },
    values.json ? () => {} : printLine,
  );
  const gateway = await gatewayCheck(process.env);
  if (!values.json) printLine(gateway);
  results.push(gateway);
  for (const check of limitChecks(process.env)) {
    results.push(check);
    if (!values.json) printLine(check);
  }
  const ok = !results.some((r) => r.status === "fail");
  if (values.json) process.stdout.write(`${JSON.stringify({ ok, checks: results })}\n`);
  return ok ? EXIT.finished : EXIT.infrastructure;
}
