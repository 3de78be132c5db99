// `turnstream import <session> FILE`: loads an exported JSONL log (same seq numbers) or a raw CLI
// stdout recording (each line becomes a cli.line event) into an empty session.
import { parseArgs } from "node:util";
import { connectRedis, createEventLog, importFile } from "../../log/index.ts";
import { logPrefix, rejectSessionId } from "./_connect.ts";

export const summary = "load an exported JSONL log or a raw CLI stdout recording into a new session";

const usage = `usage: turnstream import <session> FILE [--prefix P] [--turn T]
  FILE is either a \`turnstream export\` file (events keep their seq numbers) or the raw stdout of a
  CLI run (each line becomes a cli.line event of one attempt of turn T). The session must be empty.
  Redis from REDIS_URL (default redis://127.0.0.1:6379) or REDIS_CLUSTER_NODES.
  --prefix P   key prefix (default: TURNSTREAM_PREFIX or "ts:")
  --turn T     turn id for a raw recording (default: import-<time>)
`;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { prefix: { type: "string" }, turn: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  if (values.help) {
    process.stdout.write(usage);
    return 0;
  }
  const [session, file, ...extra] = positionals;
  if (session === undefined || file === undefined || extra.length > 0) {
    process.stderr.write(usage);
    return 2;
  }
  if (rejectSessionId("import", session)) return 2;
  const redis = connectRedis({ redisOptions: { maxRetriesPerRequest: 2 } });
  try {
    const log = createEventLog({ redis, prefix: logPrefix(values.prefix) });
    const res = await importFile(log, session, file, { turn: values.turn });
    process.stderr.write(`imported ${res.count} events (${res.mode}) into ${session}; last seq ${res.lastSeq}\n`);
    return 0;
  } finally {
    redis.disconnect();
  }
}
