// `turnstream tenants [list] | set TENANT … | clear TENANT`: each tenant's limits, spend and running
// turns, and the operator's signed changes to its limits.
import { operatorName, type OperatorKey, type OperatorKeyring } from "../../decisions/index.ts";
import { forTerminal, unsafeCharacter } from "../../kernel/index.ts";
import type { RedisClient } from "../../log/index.ts";
import { secretShapeIn } from "../../telemetry/index.ts";
import {
  clearLimits,
  OVER_BUDGET_POLICIES,
  readLimitsRecord,
  signTenantLimits,
  writeLimits,
  type OverBudgetPolicy,
  type SignedTenantLimits,
  type TenantLimitsInput,
  type TenantRow,
} from "../../tenants/index.ts";
import { listCooldowns } from "../../gateway/index.ts";
import { EXIT } from "../exit-codes.ts";
import { cooldownLines } from "./_cooldowns.ts";
import { parseCommandArgs, type ParsedArgs } from "./_args.ts";
import { logPrefix, redisOrExplain } from "./_connect.ts";
import { signingKeys, trustedKeysFromEnv } from "./_operator.ts";
import { nameText, readTenantRows, spentText, tenantArgProblem, usd } from "./_tenants.ts";

export const summary = "list tenants' budgets, spend and running turns; set (signed) or clear a tenant's limits";

const usage = `usage: turnstream tenants [list] [--json] [--prefix P]
       turnstream tenants set TENANT [--budget-usd N] [--max-running N] [--over-budget wait|fail]
                                     [--key FILE] [--by NAME] [--json] [--prefix P]
       turnstream tenants clear TENANT [--key FILE] [--by NAME] [--json] [--prefix P]
  list    every tenant that ran a turn or has limits: its budget for any 24 hours and what it spent in
          the last 24, its running turns and their limit across the fleet, its over-budget policy, and
          whether its limits verify against TURNSTREAM_OPERATOR_KEYS (when set here; else "unchecked"),
          who set them and when
  set     signs the tenant's limits with your operator key and stores them for the whole fleet; they
          replace its previous limits whole (a limit not given is no limit) and the workers' defaults
  clear   signs a record that clears the tenant's limits: its turns get the workers' defaults again
          (TURNSTREAM_TENANT_BUDGET_USD, TURNSTREAM_TENANT_MAX_RUNNING, TURNSTREAM_TENANT_OVER_BUDGET);
          a record deleted from Redis instead holds the tenant's turns back
  --budget-usd N     USD the tenant's turns may spend in any 24 hours, e.g. 50 or 12.5
  --max-running N    turns of the tenant that may run at once across the fleet, 1 to 1000000
  --over-budget P    what a turn that starts while its tenant is over budget does: wait (default) until
                     spend ages out, or fail (exit code 6, over_budget)
  --key FILE         your operator private key (default: TURNSTREAM_OPERATOR_KEY)
  --by NAME          who sets them (default: TURNSTREAM_USER, then USER, then the login name)
  --json             list: one object {"verifiedWith","tenants":[…]}; set and clear: what was stored
  --prefix P         key prefix (default: TURNSTREAM_PREFIX or "ts:")
  Limits count only when signed by a key the workers trust (their TURNSTREAM_OPERATOR_KEYS): a record
  that does not verify fails the tenant's turns (tenant_limits) rather than let them run unlimited.
  Make a key with \`turnstream operator-key new\`.
`;

const options = {
  "budget-usd": { type: "string" },
  "max-running": { type: "string" },
  "over-budget": { type: "string" },
  key: { type: "string" },
  by: { type: "string" },
  json: { type: "boolean" },
  prefix: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

type TenantsValues = ParsedArgs<{ allowPositionals: true; options: typeof options }>["values"];

/** The flags only `set` takes. */
const SET_FLAGS = ["budget-usd", "max-running", "over-budget"] as const;
const SIGNING_FLAGS = ["key", "by"] as const;

const MAX_RUNNING_LIMIT = 1_000_000;

/** Says on stderr what to change; returns the usage exit code. */
function refuse(message: string): number {
  process.stderr.write(`turnstream tenants: ${message}\n`);
  return EXIT.usage;
}

/** A flag's text as a refusal may quote it: short, escaped, never a secret. */
function quoted(text: string): string {
  if (secretShapeIn(text) !== undefined) return "a value shaped like a secret";
  return forTerminal(JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text));
}

/** --budget-usd as a number of USD, or why not. Plain decimals only: no exponents, no signs, no Infinity. */
function budgetOf(text: string | undefined): number | undefined | string {
  if (text === undefined) return undefined;
  const amount = /^(\d+(\.\d*)?|\.\d+)$/.test(text) ? Number(text) : Number.NaN;
  if (Number.isFinite(amount) && amount > 0) return amount;
  return `--budget-usd must be a number of USD above 0, like 50 or 12.5 (got ${quoted(text)})`;
}

function maxRunningOf(text: string | undefined): number | undefined | string {
  if (text === undefined) return undefined;
  const count = /^\d{1,7}$/.test(text) ? Number(text) : Number.NaN;
  if (count >= 1 && count <= MAX_RUNNING_LIMIT) return count;
  return `--max-running must be a whole number of turns from 1 to ${MAX_RUNNING_LIMIT}, like 4 (got ${quoted(text)})`;
}

function overBudgetOf(text: string | undefined): OverBudgetPolicy | string {
  if (text === undefined) return "wait";
  if ((OVER_BUDGET_POLICIES as readonly string[]).includes(text)) return text as OverBudgetPolicy;
  return `--over-budget is wait (turns wait for spend to age out) or fail (they fail, exit code 6), not ${quoted(text)}`;
}

/** Who the record says set it: shown in every listing, so one plain line and no secret. */
function byOf(text: string | undefined): string | { problem: string } {
  const by = text ?? operatorName();
  const flag = text === undefined ? "your user name (TURNSTREAM_USER, USER)" : "--by";
  if (by.length < 1 || by.length > 200) return { problem: `${flag} must be 1 to 200 characters` };
  if (unsafeCharacter(by) !== undefined)
    return {
      problem: `${flag} holds a control or invisible character (${unsafeCharacter(by)!.escaped}); give a plain name`,
    };
  if (secretShapeIn(by) !== undefined) return { problem: `${flag} looks like a secret; give a name` };
  return by;
}

/** The limits `set` was asked for, or the exit code after saying which flag to change. */
function limitsInput(tenant: string, values: TenantsValues): Omit<TenantLimitsInput, "at"> | number {
  const budgetUsd = budgetOf(values["budget-usd"]);
  if (typeof budgetUsd === "string") return refuse(budgetUsd);
  const maxRunning = maxRunningOf(values["max-running"]);
  if (typeof maxRunning === "string") return refuse(maxRunning);
  const overBudget = overBudgetOf(values["over-budget"]);
  if (overBudget !== "wait" && overBudget !== "fail") return refuse(overBudget);
  const by = byOf(values.by);
  if (typeof by !== "string") return refuse(by.problem);
  const input: Omit<TenantLimitsInput, "at"> = { tenant, overBudget, by };
  if (budgetUsd !== undefined) input.budgetUsd = budgetUsd;
  if (maxRunning !== undefined) input.maxRunning = maxRunning;
  return input;
}

/** The workers would fail the tenant's turns on a record signed by a key they do not trust: refused before writing. */
function untrustedKeyProblem(key: OperatorKey, trusted: OperatorKeyring | undefined): string | undefined {
  if (trusted === undefined || trusted.has(key.keyId)) return undefined;
  return (
    `your key ${key.keyId} is not one of TURNSTREAM_OPERATOR_KEYS: workers that trust only those keys would fail ` +
    `the tenant's turns (tenant_limits); add its public key (\`turnstream operator-key public\`) to the workers' ` +
    `TURNSTREAM_OPERATOR_KEYS and here, or sign with a trusted key`
  );
}

function limitsText(limits: Pick<SignedTenantLimits, "budgetUsd" | "maxRunning" | "overBudget">): string {
  const budget = limits.budgetUsd === undefined ? "no budget" : `budget ${usd(limits.budgetUsd)} per 24 hours`;
  const running = limits.maxRunning === undefined ? "no running limit" : `at most ${limits.maxRunning} running`;
  return `${budget}, ${running}, over budget: ${limits.overBudget}`;
}

async function setLimits(redis: RedisClient, prefix: string, signed: SignedTenantLimits, json: boolean): Promise<void> {
  await writeLimits(redis, prefix, signed);
  if (json) {
    const { signature: _signature, ...stored } = signed;
    process.stdout.write(`${JSON.stringify(stored)}\n`);
    return;
  }
  process.stdout.write(
    `tenant ${signed.tenant}: ${limitsText(signed)}; signed with ${signed.keyId} by ${forTerminal(signed.by)}\n`,
  );
  if (signed.budgetUsd === undefined && signed.maxRunning === undefined)
    process.stdout.write("  (no limits: the workers' defaults no longer apply to this tenant)\n");
}

async function runSet(tenant: string, values: TenantsValues): Promise<number> {
  const input = limitsInput(tenant, values);
  if (typeof input === "number") return input;
  const keys = signingKeys("tenants", values.key, "tenants' limits are");
  if (keys === undefined) return EXIT.usage;
  const untrusted = untrustedKeyProblem(keys.key, keys.trusted);
  if (untrusted !== undefined) return refuse(untrusted);
  const signed = signTenantLimits(keys.key, { ...input, at: new Date().toISOString() });
  const redis = await redisOrExplain("tenants");
  if (redis === undefined) return EXIT.infrastructure;
  try {
    await setLimits(redis, logPrefix(values.prefix), signed, values.json === true);
    if (keys.trusted === undefined && values.json !== true)
      process.stderr.write(
        `turnstream tenants: TURNSTREAM_OPERATOR_KEYS is not set here, so the key was not checked: the workers must trust ${keys.key.keyId}, or they fail the tenant's turns\n`,
      );
    return EXIT.finished;
  } finally {
    redis.disconnect();
  }
}

/** Whether a stored record sets limits (one that clears them, or none, does not). */
function hasLimits(raw: string | null): boolean {
  if (raw === null) return false;
  try {
    return (JSON.parse(raw) as { cleared?: unknown }).cleared !== true;
  } catch {
    return true;
  }
}

/**
 * Clearing signs a record that says so: the workers hold a tenant whose verified limits vanished
 * back, since whoever can write Redis can delete a record.
 */
async function runClear(tenant: string, values: TenantsValues): Promise<number> {
  const by = byOf(values.by);
  if (typeof by !== "string") return refuse(by.problem);
  const keys = signingKeys("tenants", values.key, "tenants' limits are");
  if (keys === undefined) return EXIT.usage;
  const untrusted = untrustedKeyProblem(keys.key, keys.trusted);
  if (untrusted !== undefined) return refuse(untrusted);
  const redis = await redisOrExplain("tenants");
  if (redis === undefined) return EXIT.infrastructure;
  try {
    const prefix = logPrefix(values.prefix);
    const cleared = hasLimits(await readLimitsRecord(redis, prefix, tenant));
    if (cleared) await clearLimits(redis, prefix, keys.key, { tenant, by, at: new Date().toISOString() });
    if (values.json === true) process.stdout.write(`${JSON.stringify({ tenant, cleared })}\n`);
    else
      process.stdout.write(
        cleared
          ? `tenant ${tenant}: limits cleared; its turns get the workers' defaults\n`
          : `tenant ${tenant} had no limits of its own; nothing changed\n`,
      );
    return EXIT.finished;
  } finally {
    redis.disconnect();
  }
}

// ---- list ---------------------------------------------------------------------------------------

/** Whether and how a row's limits hold, with who set them and when. */
function limitsColumn(row: TenantRow): string {
  const who = `${row.keyId}, set by ${row.setBy} at ${row.setAt}`;
  switch (row.limits) {
    case "verified":
      return `verified (${who})`;
    case "unchecked":
      return `unchecked: TURNSTREAM_OPERATOR_KEYS is not set here (${who})`;
    case "fails":
      return `DOES NOT VERIFY: ${row.problem}; workers fail its turns (tenant_limits)`;
    case "none":
      return "none: the workers' defaults";
  }
}

/**
 * A limit's cell: the value, "none" when the record sets none, "default" without a record, "–" when the
 * record does not verify.
 */
function limitCell(row: TenantRow, value: string | undefined): string {
  if (row.limits === "none") return "default";
  if (row.limits === "fails") return "–";
  return value ?? "none";
}

function tableOf(rows: readonly TenantRow[]): string {
  const header = ["TENANT", "BUDGET/24H", "SPENT/24H", "RUNNING", "IF OVER BUDGET", "LIMITS"];
  const lines = rows.map((row) => [
    nameText(row),
    limitCell(row, row.budgetUsd === null ? undefined : usd(row.budgetUsd)),
    row.budgetUsd === null
      ? usd(row.spentUsd)
      : `${usd(row.spentUsd)} (${row.budgetPct}%${row.overBudget === true ? ", over" : ""})`,
    `${row.running}/${limitCell(row, row.maxRunning === null ? undefined : String(row.maxRunning))}`,
    limitCell(row, row.overBudgetPolicy ?? undefined),
    limitsColumn(row),
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...lines.map((cells) => cells[column]!.length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column]!)))
      .join("  ")
      .trimEnd();
  return [line(header), ...lines.map(line)].join("\n") + "\n";
}

async function runList(values: TenantsValues): Promise<number> {
  let keyring: OperatorKeyring | undefined;
  try {
    keyring = trustedKeysFromEnv();
  } catch (err) {
    return refuse((err as Error).message);
  }
  const redis = await redisOrExplain("tenants");
  if (redis === undefined) return EXIT.infrastructure;
  try {
    const prefix = logPrefix(values.prefix);
    const [rows, cooldowns] = await Promise.all([readTenantRows(redis, prefix, keyring), listCooldowns(redis, prefix)]);
    if (values.json === true) {
      const verifiedWith = keyring === undefined ? null : "TURNSTREAM_OPERATOR_KEYS";
      process.stdout.write(`${JSON.stringify({ verifiedWith, tenants: rows, cooldowns })}\n`);
      return EXIT.finished;
    }
    if (rows.length === 0)
      process.stdout.write("no tenants: none has run a turn or has limits (`turnstream tenants set TENANT …`)\n");
    else process.stdout.write(tableOf(rows));
    // The gateway's cooldowns are per credential, shared by every tenant whose turns use it.
    if (cooldowns.length > 0)
      for (const line of cooldownLines(cooldowns)) process.stdout.write(`${forTerminal(line)}\n`);
    return EXIT.finished;
  } finally {
    redis.disconnect();
  }
}

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("tenants", usage, { args: argv, allowPositionals: true, options });
  if (typeof args === "number") return args;
  const { values, positionals } = args;
  const [action = "list", tenant, ...extra] = positionals;
  const expectsTenant = action === "set" || action === "clear";
  if (
    (action !== "list" && !expectsTenant) ||
    extra.length > 0 ||
    (expectsTenant ? tenant === undefined : tenant !== undefined)
  ) {
    process.stderr.write(usage);
    return EXIT.usage;
  }
  if (action !== "set") {
    const misplaced = SET_FLAGS.find((flag) => values[flag] !== undefined);
    if (misplaced !== undefined) return refuse(`--${misplaced} applies only to \`tenants set\``);
  }
  if (action === "list") {
    const misplaced = SIGNING_FLAGS.find((flag) => values[flag] !== undefined);
    if (misplaced !== undefined) return refuse(`--${misplaced} applies only to \`tenants set\` and \`tenants clear\``);
  }
  if (action === "list") return runList(values);
  const problem = tenantArgProblem(tenant!);
  if (problem !== undefined) return refuse(problem);
  return action === "set" ? runSet(tenant!, values) : runClear(tenant!, values);
}
