// Which tenants get a metric label of their own: those an operator configured (a limits record in
// `<prefix>tenants:limits`), read from Redis at most every REFRESH_MS. Every other tenant is "other",
// so the number of series stays bounded however many tenants turn up: a tenant is anyone's string at
// enqueue, an operator's limits record is not.
import { silentLogger, type Logger } from "../kernel/index.ts";
import type { RedisClient } from "../log/index.ts";
import { isTenantName, readAllLimitsRecords } from "../tenants/index.ts";
import { MAX_TENANT_LABELS, NO_TENANT, OTHER, tenantLabel } from "./names.ts";

/** How stale the configured tenants may get: a tenant set up now gets its own label within this. */
export const TENANTS_REFRESH_MS = 30_000;

export interface ConfiguredTenantsOptions {
  redis: RedisClient;
  logPrefix: string;
  /** Default TENANTS_REFRESH_MS. */
  refreshMs?: number | undefined;
  logger?: Logger | undefined;
}

/**
 * The names that may be label values, from the hash's fields: tenant names only (a field anyone wrote
 * with a bad name does not count), never "other" or "none" (they would read as those values), and at
 * most MAX_TENANT_LABELS of them, the first by name, so the set does not depend on the hash's order.
 */
export function labelledTenants(fields: readonly string[]): { names: Set<string>; dropped: number } {
  const valid = fields.filter((name) => isTenantName(name) && name !== OTHER && name !== NO_TENANT).sort();
  return { names: new Set(valid.slice(0, MAX_TENANT_LABELS)), dropped: Math.max(0, valid.length - MAX_TENANT_LABELS) };
}

export class ConfiguredTenants {
  readonly #options: ConfiguredTenantsOptions;
  readonly #refreshMs: number;
  readonly #logger: Logger;
  #names: ReadonlySet<string> = new Set();
  /** When the last read started (ms); a failed one counts too, so a Redis outage is not read in a loop. */
  #readAt = Number.NEGATIVE_INFINITY;
  #reading: Promise<void> | undefined;
  #warnedDropped = false;

  constructor(options: ConfiguredTenantsOptions) {
    this.#options = options;
    this.#refreshMs = options.refreshMs ?? TENANTS_REFRESH_MS;
    this.#logger = options.logger ?? silentLogger;
    void this.refresh();
  }

  /**
   * The label of a turn's tenant, from the names last read. Synchronous, for a counter's add: when they
   * are older than the refresh interval, they are read again in the background for later labels.
   */
  label(tenant: string | undefined): string {
    if (Date.now() - this.#readAt >= this.#refreshMs) void this.refresh();
    return tenantLabel(tenant, this.#names);
  }

  /** Reads the configured tenants now (one read at a time); a failed read keeps the names read before. */
  refresh(): Promise<void> {
    this.#reading ??= this.#read().finally(() => (this.#reading = undefined));
    return this.#reading;
  }

  async #read(): Promise<void> {
    this.#readAt = Date.now();
    try {
      const records = await readAllLimitsRecords(this.#options.redis, this.#options.logPrefix);
      const { names, dropped } = labelledTenants(Object.keys(records));
      this.#names = names;
      if (dropped > 0 && !this.#warnedDropped) {
        this.#warnedDropped = true;
        this.#logger.warn(
          { labelled: MAX_TENANT_LABELS, dropped },
          "more tenants have limits than metrics label by name; the rest count as other",
        );
      }
    } catch (err) {
      this.#logger.warn({ err: { message: (err as Error).message } }, "could not read which tenants have limits");
    }
  }
}
