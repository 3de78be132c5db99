// Setting and clearing tenants' limits from the console, the way `turnstream tenants set` and `clear`
// do: behind the same guards as decisions (login, CSRF token, same origin, JSON), signed server-side
// with the dashboard's operator key, recorded as the login's operator. A console without a key is
// read-only here too.
import type { IncomingMessage, ServerResponse } from "node:http";
import { z as zod } from "zod";
import { secretShapeIn } from "../telemetry/index.ts";
import {
  clearLimits,
  readLimitsRecord,
  signTenantLimits,
  tenantLimitsFields,
  tenantNameSchema,
  writeLimits,
} from "../tenants/index.ts";
import { jsonBody, sendJson } from "./http.ts";
import type { Ctx } from "./routes.ts";

/** What the page may set: the record's own fields and rules; who and when are the server's. */
const setBody = tenantLimitsFields
  .pick({ tenant: true, budgetUsd: true, maxRunning: true, overBudget: true })
  .partial({ overBudget: true });

const clearBody = zod.strictObject({ tenant: tenantNameSchema });

/** The request's body checked against `schema` and its tenant name, or undefined after answering 400. */
async function bodyOf<T>(req: IncomingMessage, res: ServerResponse, schema: zod.ZodType<T>): Promise<T | undefined> {
  const body = await jsonBody(req, res, schema, "bad tenant limits", 4 * 1024);
  if (body === undefined) return undefined;
  // A name in a secret's shape would be shown in every listing, metric and log: refused, not repeated.
  const shape = secretShapeIn((body as { tenant: string }).tenant);
  if (shape === undefined) return body;
  sendJson(res, 400, { error: `the tenant name looks like a secret (${shape}); tenant names are shown everywhere` });
  return undefined;
}

/** Why this request may not change tenants' limits (answered already), or undefined when it may. */
function refused(ctx: Ctx, req: IncomingMessage, res: ServerResponse): boolean {
  const refusal = ctx.guard.refuseChange(req);
  if (refusal !== undefined) {
    sendJson(res, 403, { error: refusal });
    return true;
  }
  if (ctx.operatorKey === undefined) {
    sendJson(res, 503, {
      error:
        "this dashboard cannot change tenants' limits: start it with TURNSTREAM_OPERATOR_KEY naming your operator key file",
    });
    return true;
  }
  return false;
}

/** `POST /api/tenants/set`: `{ tenant, budgetUsd?, maxRunning?, overBudget? }`, replacing the tenant's limits whole. */
export async function setTenantRoute(ctx: Ctx, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (refused(ctx, req, res)) return;
  const key = ctx.operatorKey!;
  const body = await bodyOf(req, res, setBody);
  if (body === undefined) return;
  // The workers would fail the tenant's turns on a record signed by a key they do not trust.
  if (ctx.trustedKeys !== undefined && !ctx.trustedKeys.has(key.keyId))
    return sendJson(res, 409, {
      error: `this dashboard's key ${key.keyId} is not one of TURNSTREAM_OPERATOR_KEYS: workers that trust only those keys would fail the tenant's turns`,
    });
  const signed = signTenantLimits(key, {
    ...body,
    overBudget: body.overBudget ?? "wait",
    by: ctx.guard.operatorOf(req),
    at: new Date().toISOString(),
  });
  await writeLimits(ctx.log.redis, ctx.log.prefix, signed);
  ctx.fleet.refreshTenants();
  const { signature: _signature, ...stored } = signed;
  sendJson(res, 200, ctx.deep(stored));
}

/** `POST /api/tenants/clear`: `{ tenant }`; its turns get the workers' defaults again. */
export async function clearTenantRoute(ctx: Ctx, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (refused(ctx, req, res)) return;
  const body = await bodyOf(req, res, clearBody);
  if (body === undefined) return;
  const key = ctx.operatorKey!;
  const cleared = (await readLimitsRecord(ctx.log.redis, ctx.log.prefix, body.tenant)) !== null;
  const by = ctx.guard.operatorOf(req);
  if (cleared)
    await clearLimits(ctx.log.redis, ctx.log.prefix, key, { tenant: body.tenant, by, at: new Date().toISOString() });
  ctx.fleet.refreshTenants();
  sendJson(res, 200, { tenant: body.tenant, cleared });
}
