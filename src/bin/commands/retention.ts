// `turnstream retention`: one retention run. Ended sessions idle longer than the age are copied to the
// archive, verified there, then removed from Redis; with no archive only --discard-history removes.
import type { RetentionEntry, RetentionReport } from "../../archive/index.ts";
import { connectForCommand } from "../../projector/index.ts";
import { EXIT } from "../exit-codes.ts";
import { parseCommandArgs } from "./_args.ts";
import { archiveOrUsage, DEFAULT_RETENTION, retentionAgeMs, retentionCounts, retentionOnce } from "./_archive.ts";
import {
  ARCHIVE_FLAG_OPTIONS,
  ARCHIVE_FLAG_USAGE,
  logPrefix,
  QUEUE_FLAG_OPTIONS,
  QUEUE_FLAGS_USAGE,
  queueConfigOf,
} from "./_connect.ts";
import { formatAge } from "./_duration.ts";

export const summary = "move ended sessions older than an age from Redis to the archive (once)";

const usage = `usage: turnstream retention [--older-than D] [--dry-run] [--json] [--archive URL] [--discard-history]
Copies each ended session whose last event is older than D to the archive, checks the archive reads
it back, then removes it from Redis. A session with a pending or running turn is kept.
  --older-than D     age such as 12h or 7d (default: TURNSTREAM_RETENTION or ${DEFAULT_RETENTION})
  --dry-run          say what would happen; change nothing
  --json             one JSON object
${ARCHIVE_FLAG_USAGE}  --discard-history  without an archive, remove the sessions anyway: their history is lost
${QUEUE_FLAGS_USAGE}Exit 0, or 2 on bad arguments, 3 when Redis or the archive does not answer.
`;

const NO_ARCHIVE =
  "nothing removed: no archive is configured. Set TURNSTREAM_ARCHIVE (or --archive URL) to keep each " +
  "session's history there first, or pass --discard-history to remove sessions without a copy";

function entryLine(entry: RetentionEntry, dryRun: boolean): string {
  const verb =
    dryRun && entry.action !== "kept" && entry.action !== "failed" ? `would be ${entry.action}` : entry.action;
  const seq = entry.lastSeq === undefined ? "" : ` (seq ${entry.lastSeq})`;
  const reason = entry.reason === undefined || entry.reason === "dry run" ? "" : `: ${entry.reason}`;
  return `${verb.padEnd(17)} ${entry.session}${seq}${reason}`;
}

function printText(report: RetentionReport): void {
  const lines = report.sessions.map((entry) => entryLine(entry, report.dryRun));
  const counts = Object.entries(retentionCounts(report))
    .filter(([, count]) => count > 0)
    .map(([action, count]) => `${count} ${action}`);
  const where = report.archive === undefined ? "no archive" : `archive ${report.archive}`;
  lines.push(
    `retention${report.dryRun ? " (dry run)" : ""}: ${counts.length === 0 ? "no sessions" : counts.join(", ")} ` +
      `idle over ${formatAge(report.olderThanMs)}, ${where}`,
  );
  process.stdout.write(lines.join("\n") + "\n");
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs("retention", usage, {
    args: argv,
    options: {
      "older-than": { type: "string" },
      "dry-run": { type: "boolean" },
      json: { type: "boolean" },
      "discard-history": { type: "boolean" },
      ...ARCHIVE_FLAG_OPTIONS,
      ...QUEUE_FLAG_OPTIONS,
      help: { type: "boolean", short: "h" },
    },
  });
  if (typeof parsed === "number") return parsed;
  const values = parsed.values;
  let olderThanMs: number;
  try {
    olderThanMs = retentionAgeMs(values["older-than"]);
  } catch (err) {
    process.stderr.write(`turnstream retention: ${(err as Error).message}\n${usage}`);
    return EXIT.usage;
  }
  const archive = await archiveOrUsage("retention", values.archive);
  if (archive === "usage") return EXIT.usage;
  const discardHistory = values["discard-history"] === true;
  const redis = await connectForCommand();
  try {
    const { logPrefix: prefix, queuePrefix, queueName } = queueConfigOf(values);
    const report = await retentionOnce({
      redis,
      logPrefix: logPrefix(prefix),
      queue: {
        ...(queuePrefix === undefined ? {} : { queuePrefix }),
        ...(queueName === undefined ? {} : { queueName }),
      },
      archive,
      olderThanMs,
      discardHistory,
      dryRun: values["dry-run"] === true,
    });
    if (values.json === true) process.stdout.write(JSON.stringify(report) + "\n");
    else printText(report);
    if (archive === undefined && !discardHistory) process.stderr.write(`turnstream retention: ${NO_ARCHIVE}\n`);
    return EXIT.finished;
  } finally {
    redis.disconnect();
    await archive?.close();
  }
}
