// `turnstream export <session> [FILE]`: writes a session's event log as JSONL (stdout without FILE).
import { createWriteStream } from "node:fs";
import { once } from "node:events";
import { finished } from "node:stream/promises";
import type { SessionHistory } from "../../archive/index.ts";
import { exportJsonl } from "../../log/index.ts";
import { connectForCommand } from "../../projector/index.ts";
import { parseCommandArgs } from "./_args.ts";
import { ARCHIVE_FLAG_OPTIONS, ARCHIVE_FLAG_USAGE, logPrefix, openHistory, rejectSessionId } from "./_connect.ts";

export const summary = "write a session's event log as JSONL (one envelope per line)";

const usage = `usage: turnstream export <session> [FILE] [--prefix P] [--archive URL]
  Writes every event of <session> as one JSON envelope per line to FILE (default: stdout), from Redis
  or, for a session retention moved out of Redis, from the archive.
  Redis from REDIS_URL (default redis://127.0.0.1:6379) or REDIS_CLUSTER_NODES.
  --prefix P        key prefix (default: TURNSTREAM_PREFIX or "ts:")
${ARCHIVE_FLAG_USAGE}`;

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("export", usage, {
    args: argv,
    allowPositionals: true,
    options: { prefix: { type: "string" }, ...ARCHIVE_FLAG_OPTIONS, help: { type: "boolean", short: "h" } },
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
  let history: SessionHistory | undefined;
  try {
    history = await openHistory(redis, logPrefix(values.prefix), values.archive);
    const st = await history.stat(session);
    if (!st.exists && st.length === 0) {
      process.stderr.write(
        `turnstream export: session ${session} has no events under this prefix; check the id (turnstream sessions) or --prefix\n`,
      );
      return 2; // a wrong id or prefix: a usage error (see ../exit-codes.ts), not a failed task
    }
    const out = file === undefined || file === "-" ? process.stdout : createWriteStream(file);
    if (out !== process.stdout) await once(out, "open");
    const count = await exportJsonl(history, session, out);
    if (out !== process.stdout) {
      out.end();
      await finished(out);
    }
    process.stderr.write(`exported ${count} events of ${session}\n`);
    return 0;
  } finally {
    await history?.close();
    redis.disconnect();
  }
}
