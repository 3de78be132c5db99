// `turnstream export <session> [FILE]`: writes a session's event log as JSONL (stdout without FILE).
import { createWriteStream } from "node:fs";
import { once } from "node:events";
import { finished } from "node:stream/promises";
import { createEventLog, exportJsonl } from "../../log/index.ts";
import { connectForCommand } from "../../projector/index.ts";
import { parseCommandArgs } from "./_args.ts";
import { logPrefix, rejectSessionId } from "./_connect.ts";

export const summary = "write a session's event log as JSONL (one envelope per line)";

const usage = `usage: turnstream export <session> [FILE] [--prefix P]
  Writes every event of <session> as one JSON envelope per line to FILE (default: stdout).
  Redis from REDIS_URL (default redis://127.0.0.1:6379) or REDIS_CLUSTER_NODES.
  --prefix P   key prefix (default: TURNSTREAM_PREFIX or "ts:")
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("export", usage, {
    args: argv,
    allowPositionals: true,
    options: { prefix: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  if (typeof args === "number") return args;
  const { values, positionals } = args;
  const [session, file, ...extra] = positionals;
  if (session === undefined || extra.length > 0) {
    process.stderr.write(usage);
    return 2;
  }
  if (rejectSessionId("export", session)) return 2;
  const redis = await connectForCommand();
  try {
    const log = createEventLog({ redis, prefix: logPrefix(values.prefix) });
    const st = await log.stat(session);
    if (!st.exists && st.length === 0) {
      process.stderr.write(
        `turnstream export: session ${session} has no events under this prefix; check the id (turnstream sessions) or --prefix\n`,
      );
      return 2; // a wrong id or prefix: a usage error (see ../exit-codes.ts), not a failed task
    }
    const out = file === undefined || file === "-" ? process.stdout : createWriteStream(file);
    if (out !== process.stdout) await once(out, "open");
    const count = await exportJsonl(log, session, out);
    if (out !== process.stdout) {
      out.end();
      await finished(out);
    }
    process.stderr.write(`exported ${count} events of ${session}\n`);
    return 0;
  } finally {
    redis.disconnect();
  }
}
