// Tenant names: whose turn it is (a repository, a team, a customer). A name is part of Redis keys, a
// metric label and listings, so it is checked as strictly as a session id, with `/` allowed for
// `owner/repo`.
import { z as zod } from "zod";

export const TENANT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.\/-]{0,99}$/;
const TENANT_NAME_RULE = "a tenant is 1-100 characters from A-Z a-z 0-9 _ . / - starting with a letter or digit";

export const tenantNameSchema = zod.string().regex(TENANT_NAME_PATTERN, TENANT_NAME_RULE);

export function isTenantName(name: string): boolean {
  return TENANT_NAME_PATTERN.test(name);
}

/** The message a refused tenant name gets: what a valid one looks like. */
export function tenantNameProblem(name: string): string | undefined {
  if (isTenantName(name)) return undefined;
  return `${JSON.stringify(name.slice(0, 100))} is not a tenant name: ${TENANT_NAME_RULE}`;
}
