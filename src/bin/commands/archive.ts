// `turnstream archive migrate`: creates or upgrades the archive's store (a PostgreSQL schema's tables,
// a folder), so workers, projectors and retention find it ready. Safe to run again: nothing to apply.
import { EXIT } from "../exit-codes.ts";
import { parseCommandArgs } from "./_args.ts";
import { archiveOrUsage } from "./_archive.ts";
import { ARCHIVE_FLAG_OPTIONS, ARCHIVE_FLAG_USAGE } from "./_connect.ts";

export const summary = "create or upgrade the archive's store (archive migrate)";

const usage = `usage: turnstream archive migrate [--archive URL] [--json]
  migrate           create or upgrade the store's schema (a file archive: its folder); says what it
                    applied, nothing the second time
${ARCHIVE_FLAG_USAGE}  --json            one JSON object
Exit 0, or 2 on bad arguments or no archive, 3 when the archive does not answer.
`;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs("archive", usage, {
    args: argv,
    allowPositionals: true,
    options: { ...ARCHIVE_FLAG_OPTIONS, json: { type: "boolean" }, help: { type: "boolean", short: "h" } },
  });
  if (typeof parsed === "number") return parsed;
  const { values, positionals } = parsed;
  if (positionals.length !== 1 || positionals[0] !== "migrate") {
    process.stderr.write(`turnstream archive: name the action (migrate)\n${usage}`);
    return EXIT.usage;
  }
  const archive = await archiveOrUsage("archive", values.archive);
  if (archive === "usage") return EXIT.usage;
  if (archive === undefined) {
    process.stderr.write(`turnstream archive: no archive: set TURNSTREAM_ARCHIVE or pass --archive URL\n${usage}`);
    return EXIT.usage;
  }
  try {
    const { applied } = await archive.migrate();
    if (values.json === true) process.stdout.write(JSON.stringify({ archive: archive.location, applied }) + "\n");
    else if (applied.length === 0) process.stdout.write(`archive ${archive.location}: up to date, nothing applied\n`);
    else process.stdout.write(`archive ${archive.location}: applied ${applied.join(", ")}\n`);
    return EXIT.finished;
  } finally {
    await archive.close();
  }
}
