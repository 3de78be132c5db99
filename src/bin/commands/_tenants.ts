// Tenants as the commands show them (`tenants`, `status`): the rows src/tenants/overview.ts builds,
// every text from Redis escaped for the terminal and scrubbed (anyone who can write Redis can name a
// tenant), and a tenant name given on the command line checked before it is used or repeated.
import type { OperatorKeyring } from "../../decisions/index.ts";
import { forTerminal } from "../../kernel/index.ts";
import type { RedisClient } from "../../log/index.ts";
import { secretShapeIn } from "../../telemetry/index.ts";
import { tenantNameProblem, tenantRows, type TenantRow } from "../../tenants/index.ts";
import { defaultScrub } from "./_scrub.ts";

/**
 * Why `name` cannot be a tenant, or undefined. A secret's shape is refused first and not repeated:
 * the name rule's message quotes the name, and a tenant name ends up in listings, metrics and logs.
 */
export function tenantArgProblem(name: string): string | undefined {
  const shape = secretShapeIn(name);
  if (shape !== undefined)
    return `the tenant name looks like a secret (${shape}), so it is neither repeated here nor used: tenant names are shown in listings, metrics and logs`;
  const problem = tenantNameProblem(name);
  return problem === undefined ? undefined : forTerminal(problem);
}

/** Every tenant's row (or only those named), as a terminal may show them. */
export function readTenantRows(
  redis: RedisClient,
  logPrefix: string,
  keyring: OperatorKeyring | undefined,
  only?: readonly string[],
): Promise<TenantRow[]> {
  const scrub = defaultScrub();
  return tenantRows({ redis, logPrefix, keyring, only, show: (text) => forTerminal(scrub(text)) });
}

export const usd = (amount: number): string => `$${amount.toFixed(2)}`;

/** `$12.34 of $50.00 (24.7%)`, or `$12.34` without a budget. */
export function spentText(row: TenantRow): string {
  if (row.budgetUsd === null) return usd(row.spentUsd);
  return `${usd(row.spentUsd)} of ${usd(row.budgetUsd)} (${row.budgetPct}%)`;
}

/** A name someone wrote to Redis by hand, said so after it. */
export function nameText(row: TenantRow): string {
  return row.nameValid ? row.tenant : `${row.tenant} (not a valid tenant name: written to Redis by hand)`;
}
