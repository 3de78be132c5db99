// `turnstream pending [--json]`: decision requests waiting for an operator, across the fleet.
import { parseArgs } from "node:util";
import { listPending, parkedSinceMs, type PendingRequest } from "../../decisions/index.ts";
import { connectForCommand } from "../../projector/index.ts";
import { logPrefix } from "./_connect.ts";
import { formatAge } from "./_duration.ts";
import { decideCommand, timeLeft } from "./_parked.ts";
import { forTerminal } from "../../kernel/index.ts";

export const summary = "list supervised tool calls waiting for a decision (all workers)";

const usage = `usage: turnstream pending [--json] [--prefix P]
  Lists decision requests from supervised turns that wait for an operator, oldest first.
  "PARKED" ones belong to a turn that waited past the worker's answer window and now waits holding
  nothing (no process, no slot) for a decision, or its deadline, which denies it; any worker resumes it.
  "abandoned" ones belong to a worker that is gone or an attempt that was retried (it asks again).
  A request marked "contains redacted text" had secrets scrubbed out of what is shown: the exact input
  is not shown, and allowing it needs --allow-redacted.
  Decide with: turnstream decide <session> <requestId> allow|deny [--always] [--reason TEXT]
  --json       one JSON array; a parked request has status "parked" and its "parked" field
  --prefix P   key prefix (default: TURNSTREAM_PREFIX or "ts:")
  Redis from REDIS_URL (default redis://127.0.0.1:6379) or REDIS_CLUSTER_NODES.
`;

/** A multi-line block indented under its label; controls and bidi characters escaped, newlines kept. */
const block = (text: string): string => forTerminal(text, { multiline: true }).replace(/\n/g, "\n      ");

/** `PARKED 3h05m`: how long a parked request has waited for its decision. */
function parkedFor(request: PendingRequest, now: number): string {
  const since = parkedSinceMs(request);
  return since === undefined ? "PARKED" : `PARKED ${formatAge(now - since)}`;
}

/**
 * One request for a person: who, what, how long; a redacted input is said plainly, before the input.
 * Everything in it came from a model or a Redis writer: each field is escaped for the terminal, and a
 * shell command is shown under its own label, apart from the model's description of it.
 */
function describe(request: PendingRequest, now: number): string {
  const state =
    request.status === "abandoned"
      ? "ABANDONED"
      : request.status === "parked"
        ? `${parkedFor(request, now)}, ${timeLeft(request.expiresAt, now)} (deadline ${forTerminal(request.expiresAt)})`
        : timeLeft(request.expiresAt, now);
  const redacted =
    request.redacted === undefined
      ? ""
      : `    ! contains redacted text (${forTerminal(request.redacted.join(", "))}): the exact input is not shown; ` +
        "allowing it needs --allow-redacted\n";
  const who = [request.session, request.requestId, request.tool].map((text) => forTerminal(text)).join(" ");
  const head = `${who} [${forTerminal(request.riskClass)}] ${state}\n`;
  const claim =
    request.description === undefined
      ? ""
      : `    model's description (a claim, not what runs): ${forTerminal(request.description)}\n`;
  const what =
    request.command === undefined
      ? `    input:   ${block(request.input)}\n`
      : `    command: ${block(request.command)}\n${claim}`;
  const decide =
    request.status === "abandoned" ? "" : `    decide:  ${decideCommand(request.session, request.requestId)}\n`;
  return `${head}${redacted}${what}${decide}`;
}

export async function run(argv: string[]): Promise<number> {
  let values: { json?: boolean; prefix?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { json: { type: "boolean" }, prefix: { type: "string" }, help: { type: "boolean", short: "h" } },
    }));
  } catch (err) {
    process.stderr.write(`turnstream pending: ${(err as Error).message}\n${usage}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(usage);
    return 0;
  }
  const redis = await connectForCommand();
  try {
    const list = await listPending({ redis, prefix: logPrefix(values.prefix) });
    if (values.json) {
      process.stdout.write(JSON.stringify(list) + "\n");
      return 0;
    }
    if (list.length === 0) {
      process.stdout.write("no pending decisions\n");
      return 0;
    }
    const now = Date.now();
    for (const request of list) process.stdout.write(describe(request, now));
    return 0;
  } finally {
    redis.disconnect();
  }
}
