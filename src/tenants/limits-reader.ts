// A worker's view of tenants' limits: each tenant's record read at most once per `ttlMs` and checked
// against the worker's operator keys, so a model call costs no extra read most of the time.
//
// A signature proves an operator signed a record once, not that it is the one in force: whoever can
// write the limits hash (the operator role, without any key) could put back an older record with a
// higher budget, or delete the record to fall back on the defaults. So the fleet remembers the newest
// record it verified for each tenant, in a hash only workers may write (tenantLimitsNewestKey): a
// record older than that one, or no record where one was seen, holds the tenant's turns back until an
// operator signs newer limits (or a signed clear).
import type { OperatorKeyring } from "../decisions/index.ts";
import { luaScript, scriptCommand, type RedisClient } from "../log/index.ts";
import { tenantLimitsNewestKey } from "./keys.ts";
import {
  limitsFromRecord,
  readLimitsRecord,
  type LimitsVerdict,
  type SignedVersion,
  type TenantDefaults,
} from "./limits.ts";

const NEWEST = luaScript("turnstreamTenantLimitsNewest", 1, new URL("./lua/newest.lua", import.meta.url));

export interface TenantLimitsReaderOptions {
  redis: RedisClient;
  logPrefix: string;
  keyring: OperatorKeyring | undefined;
  defaults: TenantDefaults;
  ttlMs?: number | undefined;
}

const signedAt = (atMs: number): string => new Date(atMs).toISOString();

/** The newest record the fleet verified for a tenant, as tenantLimitsNewestKey holds it: "<ms>|<signature>". */
export function newestVersion(stored: string | null | undefined): SignedVersion | undefined {
  if (stored === null || stored === undefined) return undefined;
  return { atMs: Number.parseInt(stored, 10), signature: stored.slice(stored.indexOf("|") + 1) };
}

/**
 * Why a tenant's record cannot be in force when `newest` is the newest one the fleet verified, or
 * undefined when it can. `version`: the record's signing (undefined: there is no signed record). A
 * record newer than `newest` can: the first worker to verify it notes it as the newest.
 */
export function heldBackWhy(
  tenant: string,
  version: SignedVersion | undefined,
  newest: SignedVersion | undefined,
): string | undefined {
  if (newest === undefined) return undefined;
  if (version === undefined)
    return `tenant ${tenant}'s limits were removed from Redis after limits signed at ${signedAt(newest.atMs)} were in force; an operator signs new ones, or clears them to the defaults`;
  if (version.atMs > newest.atMs || (version.atMs === newest.atMs && version.signature === newest.signature))
    return undefined;
  return `tenant ${tenant}'s limits signed at ${signedAt(version.atMs)} are older than limits signed at ${signedAt(newest.atMs)} that were in force (put back by someone who can write Redis?); an operator signs new ones`;
}

export class TenantLimitsReader {
  readonly #options: TenantLimitsReaderOptions;
  readonly #ttlMs: number;
  readonly #cache = new Map<string, { at: number; verdict: Promise<LimitsVerdict> }>();
  readonly #newest;

  constructor(options: TenantLimitsReaderOptions) {
    this.#options = options;
    this.#ttlMs = options.ttlMs ?? 2000;
    this.#newest = scriptCommand<[string, string]>(options.redis, NEWEST);
  }

  limitsOf(tenant: string): Promise<LimitsVerdict> {
    const cached = this.#cache.get(tenant);
    if (cached !== undefined && Date.now() - cached.at < this.#ttlMs) return cached.verdict;
    const verdict = this.#read(tenant);
    this.#cache.set(tenant, { at: Date.now(), verdict });
    // A failed read is not kept: the next call reads again.
    verdict.catch(() => this.#cache.delete(tenant));
    return verdict;
  }

  async #read(tenant: string): Promise<LimitsVerdict> {
    const { redis, logPrefix, keyring, defaults } = this.#options;
    const raw = await readLimitsRecord(redis, logPrefix, tenant);
    const verdict = limitsFromRecord(tenant, raw, keyring, defaults);
    if (!verdict.ok) return verdict;
    if (verdict.version !== undefined) return this.#againstNewest(tenant, verdict, verdict.version);
    const newest = newestVersion(await redis.hget(tenantLimitsNewestKey(logPrefix), tenant));
    const why = heldBackWhy(tenant, undefined, newest);
    return why === undefined ? verdict : { ok: false, why };
  }

  /** The verdict, unless a newer record than this one was verified before: then this one is a replay. */
  async #againstNewest(tenant: string, verdict: LimitsVerdict, version: SignedVersion): Promise<LimitsVerdict> {
    const { redis, logPrefix } = this.#options;
    const [atMs, signature] = await this.#newest(
      [tenantLimitsNewestKey(logPrefix)],
      [tenant, version.atMs, version.signature],
    );
    const why = heldBackWhy(tenant, version, { atMs: Number(atMs), signature });
    return why === undefined ? verdict : { ok: false, why };
  }
}
