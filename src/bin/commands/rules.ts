// `turnstream rules list|revoke`: the fleet's trust rules (the hash `decide --always` adds to). `list`
// shows each rule and whether its signature verifies against TURNSTREAM_OPERATOR_KEYS (the hub honours
// only those that do); `revoke` takes one out, so the hub stops honouring it, and records who did in
// the log as `rule.revoked`; `list --revoked` shows the recent revocations (their index:
// revoked-index.ts) and whether each record's signature verifies. Everything shown was written by
// whoever can write Redis: escaped for the terminal.
import { forTerminal } from "../../kernel/index.ts";
import {
  checkRule,
  loadOperatorKey,
  readRevocations,
  revocationRow,
  REVOKED_KEPT,
  OperatorKeyError,
  operatorKeyLinesFromEnv,
  operatorName,
  parseOperatorKeys,
  revokeRule,
  RuleRevokeError,
  RuleStore,
  type OperatorKey,
  type OperatorKeyring,
  type RevocationRow,
  type RuleCheck,
  type TrustRule,
} from "../../decisions/index.ts";
import { createEventLog, type RedisClient } from "../../log/index.ts";
import { connectForCommand } from "../../projector/index.ts";
import { EXIT } from "../exit-codes.ts";
import { parseCommandArgs, type ParsedArgs } from "./_args.ts";
import { logPrefix, rejectSessionId } from "./_connect.ts";

export const summary = "list the fleet's trust rules (and whether each verifies), or revoke one";

const usage = `usage: turnstream rules list [--revoked] [--json] [--prefix P]
       turnstream rules revoke ID|PATTERN [--reason TEXT] [--by NAME] [--session S] [--key FILE] [--json] [--prefix P]
  list            every trust rule: id, effect, pattern, who added it and when, why, the session whose
                  decision added it, and whether its signature verifies against TURNSTREAM_OPERATOR_KEYS
                  (when set here; else "unchecked"). Workers honour only rules that verify.
  --revoked       instead, the ${REVOKED_KEPT} most recent revocations, newest first: the rule, who added it, who
                  revoked it, when and why, whether the rule.revoked record's signature verifies, and
                  the session and event that record it (older ones are in their sessions' logs only)
  revoke          removes the rule with that id (or exactly that pattern): workers stop honouring it at
                  once. Records who revoked it (rule.revoked) in the log of the session whose decision
                  added it, as the rule's addition was recorded there.
  --reason TEXT   why (recorded)
  --by NAME       who revokes (default: TURNSTREAM_USER, then USER, then the login name)
  --session S     record it in session S's log instead: for a rule whose session is no longer in Redis,
                  or that no decision added
  --key FILE      sign the record with your operator key (default: TURNSTREAM_OPERATOR_KEY when set;
                  revoking only takes trust away, so it needs no key)
  --json          one JSON object (list: an array of rules; --revoked: { revocations, unreadable })
  --prefix P      key prefix (default: TURNSTREAM_PREFIX or "ts:")
  Needs a Redis user with the operator role to revoke (see \`turnstream acl\`).
`;

const options = {
  revoked: { type: "boolean" },
  reason: { type: "string" },
  by: { type: "string" },
  session: { type: "string" },
  key: { type: "string" },
  json: { type: "boolean" },
  prefix: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

type RulesValues = ParsedArgs<{ allowPositionals: true; options: typeof options }>["values"];

function signatureText(keyId: string | undefined, checked: RuleCheck): string {
  if (checked.verified === null) return `signed by ${keyId ?? "no key"}, unchecked (no TURNSTREAM_OPERATOR_KEYS)`;
  return checked.verified ? `verified (${keyId})` : `does NOT verify: ${checked.why}`;
}

/** Two or three lines per rule, every text a Redis writer chose escaped. */
function ruleText(rule: TrustRule, checked: RuleCheck): string {
  const from =
    rule.source === undefined ? "" : `, from session ${rule.source.session} (request ${rule.source.requestId})`;
  const lines = [
    `${rule.id} ${rule.effect} ${rule.pattern}`,
    `  added by ${rule.by} at ${rule.at}${from}; signature: ${signatureText(rule.keyId, checked)}`,
  ];
  if (rule.reason !== undefined && rule.reason !== "") lines.push(`  reason: ${rule.reason}`);
  return lines.map((line) => forTerminal(line)).join("\n") + "\n";
}

async function listRules(
  redis: RedisClient,
  values: RulesValues,
  trusted: OperatorKeyring | undefined,
): Promise<number> {
  const rules = await new RuleStore(redis, logPrefix(values.prefix)).list();
  const listed = rules.map((rule) => ({ rule, signature: checkRule(rule, trusted) }));
  if (values.json) {
    const rows = listed.map(({ rule, signature }) => ({ ...rule, verified: signature.verified, why: signature.why }));
    process.stdout.write(JSON.stringify(rows) + "\n");
  } else if (rules.length === 0) process.stdout.write("no trust rules\n");
  else for (const { rule, signature } of listed) process.stdout.write(ruleText(rule, signature));
  return EXIT.finished;
}

/** Two or three lines per revocation, every text a Redis writer chose escaped. */
function revocationText(row: RevocationRow): string {
  const checked = { verified: row.verified, why: row.why ?? undefined };
  const lines = [
    `${row.ruleId} ${row.effect} ${row.pattern}`,
    `  added by ${row.addedBy}; revoked by ${row.revokedBy} at ${row.revokedAt}, recorded at seq ${row.seq} of session ${row.session}; signature: ${signatureText(row.keyId ?? undefined, checked)}`,
  ];
  if (row.reason !== null) lines.push(`  reason: ${row.reason}`);
  return lines.map((line) => forTerminal(line)).join("\n") + "\n";
}

async function listRevoked(
  redis: RedisClient,
  values: RulesValues,
  trusted: OperatorKeyring | undefined,
): Promise<number> {
  const recent = await readRevocations(redis, logPrefix(values.prefix));
  const revocations = recent.revocations.map((revocation) => revocationRow(revocation, trusted));
  if (values.json) process.stdout.write(JSON.stringify({ revocations, unreadable: recent.unreadable }) + "\n");
  else {
    if (revocations.length === 0) process.stdout.write("no recent revocations\n");
    for (const row of revocations) process.stdout.write(revocationText(row));
    if (recent.unreadable > 0)
      process.stdout.write(`${recent.unreadable} entries of the index are not revocations: not shown\n`);
  }
  return EXIT.finished;
}

/** The operator key to sign with: --key, else TURNSTREAM_OPERATOR_KEY, else none (the record is unsigned). */
function signingKey(flag: string | undefined): OperatorKey | undefined {
  const path = flag ?? process.env["TURNSTREAM_OPERATOR_KEY"];
  return path === undefined || path === "" ? undefined : loadOperatorKey(path);
}

async function revoke(
  redis: RedisClient,
  values: RulesValues,
  ref: string,
  signer: OperatorKey | undefined,
): Promise<number> {
  const log = createEventLog({ redis, prefix: logPrefix(values.prefix) });
  try {
    const res = await revokeRule(
      { log },
      {
        rule: ref,
        by: values.by ?? operatorName(),
        reason: values.reason,
        session: values.session,
        operatorKey: signer,
      },
    );
    if (values.json) process.stdout.write(JSON.stringify(res) + "\n");
    else {
      const signed = res.revoked.keyId === undefined ? "unsigned" : `signed with ${res.revoked.keyId}`;
      const gone = res.removed ? "revoked" : "was gone already (revoked meanwhile); recorded";
      process.stdout.write(
        forTerminal(`${res.rule.id} ${res.rule.effect} ${res.rule.pattern}: ${gone}`) +
          `; rule.revoked at seq ${res.seq} of session ${res.session} (${signed})\n`,
      );
    }
    return EXIT.finished;
  } catch (err) {
    // Not found, ambiguous, nowhere to record it, a user without the operator role: fix the call.
    if (!(err instanceof RuleRevokeError)) throw err;
    process.stderr.write(`turnstream rules revoke: ${forTerminal(err.message)}\n`);
    return EXIT.usage;
  }
}

/** The trusted keys of TURNSTREAM_OPERATOR_KEYS, when set here. */
function trustedKeys(): OperatorKeyring | undefined {
  const lines = operatorKeyLinesFromEnv(process.env["TURNSTREAM_OPERATOR_KEYS"]);
  return lines === undefined ? undefined : parseOperatorKeys(lines, "TURNSTREAM_OPERATOR_KEYS");
}

type Lister = (redis: RedisClient, values: RulesValues, trusted: OperatorKeyring | undefined) => Promise<number>;
type Subcommand = { list: Lister; revoke?: undefined } | { revoke: string };

/** The subcommand and its argument, or the exit code after saying on stderr what is wrong. */
function subcommandOf(positionals: string[], values: RulesValues): Subcommand | number {
  const [sub, ...rest] = positionals;
  if (sub === "list" && rest.length === 0) return { list: values.revoked === true ? listRevoked : listRules };
  if (sub === "revoke" && rest.length === 1 && rest[0] !== "" && values.revoked !== true) {
    if (values.session !== undefined && rejectSessionId("rules revoke", values.session)) return EXIT.usage;
    return { revoke: rest[0]! };
  }
  process.stderr.write(usage);
  return EXIT.usage;
}

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("rules", usage, { args: argv, allowPositionals: true, options });
  if (typeof args === "number") return args;
  const { values } = args;
  const picked = subcommandOf(args.positionals, values);
  if (typeof picked === "number") return picked;
  // The keys first, so a key file that cannot be used is said before anything connects.
  let keys: { trusted?: OperatorKeyring | undefined; signer?: OperatorKey | undefined };
  try {
    keys = picked.revoke === undefined ? { trusted: trustedKeys() } : { signer: signingKey(values.key) };
  } catch (err) {
    if (!(err instanceof OperatorKeyError)) throw err;
    process.stderr.write(`turnstream rules: ${err.message}\n`);
    return EXIT.usage;
  }
  const redis = await connectForCommand();
  try {
    return picked.revoke === undefined
      ? await picked.list(redis, values, keys.trusted)
      : await revoke(redis, values, picked.revoke, keys.signer);
  } finally {
    redis.disconnect();
  }
}
