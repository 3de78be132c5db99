// `turnstream import <session> FILE`: loads an exported JSONL log (same seq numbers) or a raw CLI
// stdout recording (each line becomes a cli.line event) into an empty session.
import { createEventLog, importFile } from "../../log/index.ts";
import { connectForCommand } from "../../projector/index.ts";
import { EXIT } from "../exit-codes.ts";
import { parseCommandArgs } from "./_args.ts";
import { logPrefix, rejectSessionId } from "./_connect.ts";

export const summary = "load an exported JSONL log or a raw CLI stdout recording into a new session";

const usage = `usage: turnstream import <session> FILE [--prefix P] [--turn T]
  FILE is either a \`turnstream export\` file (events keep their seq numbers) or the raw stdout of a
  CLI run (each line becomes a cli.line event of one attempt of turn T). The session must be empty.
  The session is marked as imported (sessions and replay say so): its log is what the file said, so
  \`turnstream rerun\` re-runs it only in the default permission mode.
  Redis from REDIS_URL (default redis://127.0.0.1:6379) or REDIS_CLUSTER_NODES.
  --prefix P   key prefix (default: TURNSTREAM_PREFIX or "ts:")
  --turn T     turn id for a raw recording (default: import-<time>)
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("import", usage, {
    args: argv,
    allowPositionals: true,
    options: { prefix: { type: "string" }, turn: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  if (typeof args === "number") return args;
  const { values, positionals } = args;
  const [session, file, ...extra] = positionals;
  if (session === undefined || file === undefined || extra.length > 0) {
    process.stderr.write(usage);
    return 2;
  }
  if (rejectSessionId("import", session)) return 2;
  const redis = await connectForCommand();
  try {
    const log = createEventLog({ redis, prefix: logPrefix(values.prefix) });
    const res = await importFile(log, session, file, { turn: values.turn });
    const marked = "marked as imported (untrusted: rerun grants it only the default permission mode)";
    process.stderr.write(
      `imported ${res.count} events (${res.mode}) into ${session}, ${marked}; last seq ${res.lastSeq}\n`,
    );
    return EXIT.finished;
  } catch (err) {
    // The file or the target session is wrong (unreadable, mixed formats, a session with events)
    // unless Redis itself stopped answering: then the dispatcher reports infrastructure.
    if (
      !(await redis.ping().then(
        () => true,
        () => false,
      ))
    )
      throw err;
    process.stderr.write(`turnstream import: ${(err as Error).message}\n`);
    return EXIT.usage;
  } finally {
    redis.disconnect();
  }
}
