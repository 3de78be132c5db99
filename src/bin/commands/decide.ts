// `turnstream decide <session> <requestId> allow|deny [--always] [--reason TEXT] [--by NAME]`: a signed decision.
import { forTerminal } from "../../kernel/index.ts";
import {
  decide,
  DecisionError,
  InvalidRuleError,
  operatorName,
  type DecideInput,
  type DecideResult,
  type OperatorKey,
} from "../../decisions/index.ts";
import { createEventLog } from "../../log/index.ts";
import { connectForCommand } from "../../projector/index.ts";
import { parseCommandArgs, type ParsedArgs } from "./_args.ts";
import { logPrefix, rejectSessionId } from "./_connect.ts";
import { signingKeys } from "./_operator.ts";
import { EXIT } from "../exit-codes.ts";

export const summary =
  "allow or deny a pending supervised tool call (optionally as a lasting rule), signed with your operator key";

const usage = `usage: turnstream decide <session> <requestId> allow|deny [--always] [--rule PATTERN] [--reason TEXT] [--by NAME]
  Records the decision in the session's log, signed with your operator key; the waiting worker acts on
  it at once if it trusts that key (its TURNSTREAM_OPERATOR_KEYS), and ignores it otherwise.
  --always          also add a fleet-wide trust rule deciding matching calls the same way from now on
  --rule PATTERN    the rule for --always, e.g. "Bash(git status*)" (default: exactly this call)
  --reason TEXT     why (shown to the agent and recorded)
  --by NAME         who decides (default: TURNSTREAM_USER, then USER, then the login name)
  --allow-redacted  allow although the request's shown input had secrets scrubbed out (recorded)
  --key FILE        your operator private key (default: TURNSTREAM_OPERATOR_KEY)
  --prefix P        key prefix (default: TURNSTREAM_PREFIX or "ts:")
  Make a key with \`turnstream operator-key new\`; give its public key to the workers.
`;

const options = {
  always: { type: "boolean" },
  rule: { type: "string" },
  reason: { type: "string" },
  by: { type: "string" },
  "allow-redacted": { type: "boolean" },
  key: { type: "string" },
  prefix: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

type DecideValues = ParsedArgs<{ allowPositionals: true; options: typeof options }>["values"];

/** The decision asked for, or the exit code after saying on stderr what is wrong. */
function decideInput(values: DecideValues, positionals: string[]): DecideInput | number {
  const [session, requestId, decision, ...extra] = positionals;
  if (
    session === undefined ||
    requestId === undefined ||
    (decision !== "allow" && decision !== "deny") ||
    extra.length > 0
  ) {
    process.stderr.write(usage);
    return 2;
  }
  if (rejectSessionId("decide", session)) return 2;
  if (values.rule !== undefined && values.always !== true) {
    process.stderr.write("turnstream decide: --rule only applies with --always\n");
    return 2;
  }
  return {
    session,
    requestId,
    decision,
    by: values.by ?? operatorName(),
    reason: values.reason,
    always: values.always,
    rule: values.rule,
    allowRedacted: values["allow-redacted"],
  };
}

/** What was decided on, as recorded: the tool and its exact command or input, escaped for the terminal. */
function decidedCall(res: DecideResult): string {
  const request = res.request;
  const what = request.subject ?? request.input;
  return `  ${forTerminal(request.tool)}: ${forTerminal(what, { multiline: true }).replace(/\n/g, "\n    ")}\n`;
}

function printDecision(res: DecideResult, input: DecideInput, key: OperatorKey, json: boolean | undefined): void {
  const id = forTerminal(input.requestId);
  if (json) process.stdout.write(JSON.stringify(res) + "\n");
  else if (!res.applied) {
    const first = `${res.decision.decision} by ${forTerminal(res.decision.by)}`;
    process.stdout.write(`${id}: another decision came first: ${first}\n${decidedCall(res)}`);
  } else {
    const redacted = res.decision.allowRedacted === true ? " (allowed with redacted input, as you asked)" : "";
    const rule = res.rule ? `; rule ${forTerminal(res.rule.pattern)} added` : "";
    const recorded = `${input.decision} recorded (seq ${res.seq}, signed with ${key.keyId})`;
    process.stdout.write(`${id}: ${recorded}${redacted}${rule}\n${decidedCall(res)}`);
  }
}

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("decide", usage, { args: argv, allowPositionals: true, options });
  if (typeof args === "number") return args;
  const { values } = args;
  const input = decideInput(values, args.positionals);
  if (typeof input === "number") return input;
  const keys = signingKeys("decide", values.key, "decisions are");
  if (keys === undefined) return 2;
  const redis = await connectForCommand();
  try {
    const log = createEventLog({ redis, prefix: logPrefix(values.prefix) });
    const res = await decide({ log, operatorKey: keys.key, trustedKeys: keys.trusted }, input);
    printDecision(res, input, keys.key, values.json);
    return res.applied ? 0 : 1;
  } catch (err) {
    // The decision cannot be made as asked (decided already, expired, redacted input, a rule that does
    // not parse, a Redis user without the operator role): fix the call, retrying it fails the same way.
    if (err instanceof DecisionError || err instanceof InvalidRuleError) {
      // The message quotes what others wrote (who decided, a pattern): escaped for the terminal.
      process.stderr.write(`turnstream decide: ${forTerminal(err.message)}\n`);
      return EXIT.usage;
    }
    throw err;
  } finally {
    redis.disconnect();
  }
}
