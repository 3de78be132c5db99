// Key layout of tenants. A tenant's running turns and spend carry the tag `{t:<tenant>}`, so one
// script checks both atomically on a single Redis and on a cluster. The fair-share clock lives under
// the queue's own tag: its script reads BullMQ's prioritized set in the same step.
export interface TenantKeys {
  /** Sorted set: lease token of each running turn → when its reservation lapses (ms, Redis time). */
  readonly running: string;
  /** Hash: spend bucket number → micro-USD spent in it. */
  readonly spend: string;
  /** Sorted set: model call id → when it was counted (ms): a call is counted once. */
  readonly calls: string;
  /** List of job ids that found the tenant at its running limit: the next release wakes one. */
  readonly blocked: string;
  /** Hash: call id of each model call out now → the most it can cost and when its hold lapses. */
  readonly holds: string;
}

export function tenantKeys(logPrefix: string, tenant: string): TenantKeys {
  const tag = `${logPrefix}{t:${tenant}}`;
  return {
    running: `${tag}:running`,
    spend: `${tag}:spend`,
    calls: `${tag}:calls`,
    blocked: `${tag}:blocked`,
    holds: `${tag}:holds`,
  };
}

/** Hash: tenant → its signed limits (JSON). */
export const tenantLimitsKey = (logPrefix: string): string => `${logPrefix}tenants:limits`;

/**
 * Hash: tenant → the newest signed limits a worker has verified (its time and signature). Workers write
 * it, the operator role cannot: a record older than it is a replay, and its tenant's turns are held back.
 */
export const tenantLimitsNewestKey = (logPrefix: string): string => `${logPrefix}tenants:limits-newest`;

/** Sorted set: tenant → when a turn of it last started or was enqueued (ms): what `tenants` lists. */
export const tenantsSeenKey = (logPrefix: string): string => `${logPrefix}tenants:seen`;

/** Hash under the queue's tag: tenant → the fair-share position of its newest queued turn. */
export const fairShareKey = (queuePrefix: string, queueName: string): string =>
  `${queuePrefix}:${queueName}:tenants:vt`;
