// A worker's view of tenants' limits: each tenant's record read at most once per `ttlMs` and checked
// against the worker's operator keys, so a model call costs no extra read most of the time.
import type { OperatorKeyring } from "../decisions/index.ts";
import type { RedisClient } from "../log/index.ts";
import { limitsFromRecord, readLimitsRecord, type LimitsVerdict, type TenantDefaults } from "./limits.ts";

export interface TenantLimitsReaderOptions {
  redis: RedisClient;
  logPrefix: string;
  keyring: OperatorKeyring | undefined;
  defaults: TenantDefaults;
  ttlMs?: number | undefined;
}

export class TenantLimitsReader {
  readonly #options: TenantLimitsReaderOptions;
  readonly #ttlMs: number;
  readonly #cache = new Map<string, { at: number; verdict: Promise<LimitsVerdict> }>();

  constructor(options: TenantLimitsReaderOptions) {
    this.#options = options;
    this.#ttlMs = options.ttlMs ?? 2000;
  }

  limitsOf(tenant: string): Promise<LimitsVerdict> {
    const cached = this.#cache.get(tenant);
    if (cached !== undefined && Date.now() - cached.at < this.#ttlMs) return cached.verdict;
    const { redis, logPrefix, keyring, defaults } = this.#options;
    const verdict = readLimitsRecord(redis, logPrefix, tenant).then((raw) =>
      limitsFromRecord(tenant, raw, keyring, defaults),
    );
    this.#cache.set(tenant, { at: Date.now(), verdict });
    // A failed read is not kept: the next call reads again.
    verdict.catch(() => this.#cache.delete(tenant));
    return verdict;
  }
}
