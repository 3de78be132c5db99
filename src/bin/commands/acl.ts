// `turnstream acl [--out FILE] [--prefix P] [--queue-prefix Q]`: Redis ACL users for the roles.
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { ACL_ROLE_PURPOSE, ACL_ROLES, newAclPasswords, redisAclFile } from "../../decisions/index.ts";
import { DEFAULT_PREFIX } from "../../kernel/index.ts";
import { DEFAULT_QUEUE_PREFIX, queueConfigFromEnv } from "../../queue/index.ts";

export const summary = "print (or write with passwords) the Redis ACL users: worker, operator, reader, admin";

const usage = `usage: turnstream acl [--out FILE] [--prefix P] [--queue-prefix Q]
  Without --out: prints the ACL file with every role turned off (no passwords), for review; the same
  as deploy/redis-users.acl for the default prefixes.
  --out FILE  writes the ACL file (mode 0600, never overwrites) with a fresh password per role, stored
              hashed, and prints "<role> <password>" lines once: connect as
              REDIS_URL=redis://<role>:<password>@host:port. Load it with redis-server --aclfile FILE.
  Roles (the default user is turned off):
${ACL_ROLES.map((r) => `    ${r.padEnd(9)} ${ACL_ROLE_PURPOSE[r]}`).join("\n")}
  --prefix P        log prefix (default: TURNSTREAM_PREFIX or "ts:")
  --queue-prefix Q  queue prefix (default: TURNSTREAM_QUEUE_PREFIX or "{turnstream}")
`;

export async function run(argv: string[]): Promise<number> {
  let values: { out?: string; prefix?: string; "queue-prefix"?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        out: { type: "string" },
        prefix: { type: "string" },
        "queue-prefix": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (err) {
    process.stderr.write(`turnstream acl: ${(err as Error).message}\n${usage}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(usage);
    return 0;
  }
  const env = queueConfigFromEnv();
  const prefixes = {
    logPrefix: values.prefix ?? env.logPrefix ?? DEFAULT_PREFIX,
    queuePrefix: values["queue-prefix"] ?? env.queuePrefix ?? DEFAULT_QUEUE_PREFIX,
  };
  try {
    if (values.out === undefined) {
      process.stdout.write(redisAclFile(prefixes));
      return 0;
    }
    const passwords = newAclPasswords();
    writeFileSync(values.out, redisAclFile({ ...prefixes, passwords }), { mode: 0o600, flag: "wx" });
    for (const role of ACL_ROLES) process.stdout.write(`${role} ${passwords[role]}\n`);
    process.stderr.write(
      `wrote ${values.out}; start Redis with --aclfile ${values.out}; the passwords above are shown only now\n`,
    );
    return 0;
  } catch (err) {
    const exists = (err as NodeJS.ErrnoException).code === "EEXIST";
    process.stderr.write(
      `turnstream acl: ${exists ? `${values.out} already exists; choose another file (an ACL file is never overwritten)` : (err as Error).message}\n`,
    );
    return 2;
  }
}
