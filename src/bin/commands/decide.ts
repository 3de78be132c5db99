// `turnstream decide <session> <requestId> allow|deny [--always] [--reason TEXT] [--by NAME]`.
import { userInfo } from "node:os";
import { parseArgs } from "node:util";
import { decide, DecisionError, InvalidRuleError } from "../../decisions/index.ts";
import { connectRedis, createEventLog } from "../../log/index.ts";
import { logPrefix, rejectSessionId } from "./_connect.ts";

export const summary = "allow or deny a pending supervised tool call (optionally as a lasting rule)";

const usage = `usage: turnstream decide <session> <requestId> allow|deny [--always] [--rule PATTERN] [--reason TEXT] [--by NAME]
  Records the decision in the session's log; the waiting worker acts on it at once.
  --always        also add a fleet-wide trust rule deciding matching calls the same way from now on
  --rule PATTERN  the rule for --always, e.g. "Bash(git status*)" (default: exactly this call)
  --reason TEXT   why (shown to the agent and recorded)
  --by NAME       who decides (default: TURNSTREAM_USER, then USER, then the login name)
  --prefix P      key prefix (default: TURNSTREAM_PREFIX or "ts:")
`;

function defaultUser(): string {
  const env = process.env["TURNSTREAM_USER"] || process.env["USER"];
  if (env) return env;
  try {
    return userInfo().username;
  } catch {
    return "unknown";
  }
}

export async function run(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        always: { type: "boolean" },
        rule: { type: "string" },
        reason: { type: "string" },
        by: { type: "string" },
        prefix: { type: "string" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (err) {
    process.stderr.write(`turnstream decide: ${(err as Error).message}\n${usage}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(usage);
    return 0;
  }
  const [session, requestId, decision, ...extra] = positionals;
  if (session === undefined || requestId === undefined || (decision !== "allow" && decision !== "deny") || extra.length > 0) {
    process.stderr.write(usage);
    return 2;
  }
  if (rejectSessionId("decide", session)) return 2;
  if (values.rule !== undefined && values.always !== true) {
    process.stderr.write("turnstream decide: --rule only applies with --always\n");
    return 2;
  }
  const redis = connectRedis({ redisOptions: { maxRetriesPerRequest: 2 } });
  try {
    const log = createEventLog({ redis, prefix: logPrefix(values.prefix) });
    const res = await decide(
      { log },
      {
        session,
        requestId,
        decision,
        by: values.by ?? defaultUser(),
        ...(values.reason !== undefined ? { reason: values.reason } : {}),
        ...(values.always === true ? { always: true } : {}),
        ...(values.rule !== undefined ? { rule: values.rule } : {}),
      },
    );
    if (values.json) process.stdout.write(JSON.stringify(res) + "\n");
    else if (!res.applied) {
      process.stdout.write(`${requestId}: another decision came first: ${res.decision.decision} by ${res.decision.by}\n`);
    } else {
      process.stdout.write(`${requestId}: ${decision} recorded (seq ${res.seq})${res.rule ? `; rule ${res.rule.pattern} added` : ""}\n`);
    }
    return res.applied ? 0 : 1;
  } catch (err) {
    if (err instanceof DecisionError || err instanceof InvalidRuleError) {
      process.stderr.write(`turnstream decide: ${err.message}\n`);
      return 1;
    }
    throw err;
  } finally {
    redis.disconnect();
  }
}
