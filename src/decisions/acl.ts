// Redis ACL users for a turnstream deployment. The operator key decides whether a decision counts;
// these users decide who can write at all: a reader (dashboards, `pending`, `tail`, `sessions`) can
// write nothing, an operator can append decisions and rules but not touch the queue or the leases, a
// worker can do what running turns needs. The `default` user is turned off: without that, anyone who
// reaches the port is everyone.
import { createHash, randomBytes } from "node:crypto";
import { DEFAULT_PREFIX } from "../log/index.ts";
import { revokedKey } from "./revoked-index.ts";
import { rulesKey } from "./rules.ts";

export const ACL_ROLES = ["admin", "worker", "operator", "reader"] as const;
export type AclRole = (typeof ACL_ROLES)[number];

export interface AclOptions {
  /** The event log's key prefix (TURNSTREAM_PREFIX; default "ts:"). */
  logPrefix?: string;
  /** The queue's prefix (TURNSTREAM_QUEUE_PREFIX; default "{turnstream}"). */
  queuePrefix?: string;
  /** Passwords by role; a role without one is written `off` (it cannot log in until given one). */
  passwords?: Partial<Record<AclRole, string>>;
}

// The same characters the log and the queue accept: none of them is special in an ACL key pattern.
const LOG_PREFIX = /^[A-Za-z0-9_.:-]{0,64}$/;
const QUEUE_PREFIX = /^\{[A-Za-z0-9_.:-]{1,64}\}$/;

/** What each role is for (Redis ACL files allow no comments, so this goes in the docs and help). */
export const ACL_ROLE_PURPOSE: Record<AclRole, string> = {
  admin: "administers Redis (ACL, CONFIG); never given to turnstream processes",
  worker: "runs turns: the queue, the log, leases, snapshots, the decision hub",
  operator:
    "reads everything turnstream stores; writes only session logs (decisions, rules), the trust rules and recent revocations, tenants' limits, the pending index and parked turns' wake-ups",
  reader: "reads everything turnstream stores and writes nothing (pending, tail, sessions, dashboards)",
};

/** Key and command rules of each role (everything after the password). */
function rules(role: AclRole, logPrefix: string, queuePrefix: string): string {
  const read = `%R~${logPrefix}* %R~${queuePrefix}*`;
  const readCommands = "-@all +@read +@connection -@dangerous +info";
  switch (role) {
    case "admin":
      return "~* &* +@all";
    case "worker":
      return `~${logPrefix}* ~${queuePrefix}* &* -@all +@all -@dangerous +info +client|setname +client|getname +client|id`;
    case "operator": {
      const session = `${logPrefix}{s:*}`;
      const writable = [
        `${session}:events`,
        `${session}:meta`,
        `${session}:blobs`,
        `${logPrefix}sessions`,
        rulesKey(logPrefix),
        revokedKey(logPrefix),
        `${logPrefix}decisions:pending`,
        `${logPrefix}decisions:wake:*`,
        `${logPrefix}tenants:limits`,
      ];
      const writes = "+evalsha +eval +xadd +hset +hdel +sadd +persist +pexpire +zadd +lpush +multi +exec";
      // The index of recent revocations is trimmed in the transaction that adds to it. LTRIM is granted
      // on that key alone (a selector): on the wake lists it would drop other operators' wake-ups.
      const trimRevoked = `(~${revokedKey(logPrefix)} +ltrim)`;
      return `${read} ${writable.map((k) => `~${k}`).join(" ")} ${readCommands} ${writes} ${trimRevoked}`;
    }
    case "reader":
      return `${read} ${readCommands}`;
  }
}

const sha256 = (s: string): string => createHash("sha256").update(s).digest("hex");

/**
 * An ACL file (`redis-server --aclfile`) with the four roles and `default` turned off. A role without a
 * password is written `off`: it cannot log in until given one (`ACL SETUSER <role> on >password`).
 */
export function redisAclFile(options: AclOptions = {}): string {
  const logPrefix = options.logPrefix ?? DEFAULT_PREFIX;
  const queuePrefix = options.queuePrefix ?? "{turnstream}";
  if (!LOG_PREFIX.test(logPrefix))
    throw new Error(`log prefix ${JSON.stringify(logPrefix)} must be 0-64 characters from A-Z a-z 0-9 _ . : -`);
  if (!QUEUE_PREFIX.test(queuePrefix))
    throw new Error(`queue prefix ${JSON.stringify(queuePrefix)} must be one hash tag like {turnstream}`);
  const lines = ["user default off resetpass resetkeys resetchannels -@all"];
  for (const role of ACL_ROLES) {
    const pw = options.passwords?.[role];
    const login = pw === undefined ? "off resetpass" : `on resetpass #${sha256(pw)}`;
    lines.push(`user ${role} ${login} resetkeys resetchannels ${rules(role, logPrefix, queuePrefix)}`);
  }
  return lines.join("\n") + "\n";
}

/** A fresh random password per role, for `redisAclFile({ passwords })`. */
export function newAclPasswords(): Record<AclRole, string> {
  const out = {} as Record<AclRole, string>;
  for (const role of ACL_ROLES) out[role] = randomBytes(24).toString("base64url");
  return out;
}
