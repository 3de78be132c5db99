// `turnstream parse FILE|-`: summarises a stream-json transcript (raw CLI stdout) as one JSON object.
// The input is streamed through the line splitter, so memory stays bounded for any size. It exits by
// the run's outcome under the table in ../exit-codes.ts, so a pipeline can check a recorded run too.
import { createReadStream } from "node:fs";
import { createLineSplitter, parseItem, RunSummarizer, type SplitItem } from "../../protocol/index.ts";
import { EXIT, exitCodeOf, outcomeOfErrorKind } from "../exit-codes.ts";
import { parseCommandArgs } from "./_args.ts";

export const summary = "summarise a stream-json transcript (file or - for stdin) as one JSON object";

const usage = `usage: turnstream parse [--max-line-bytes N] FILE|-
Exit code: 0 the run finished, 1 the agent failed the task (max turns, max budget, invalid request),
3 infrastructure worth retrying (rate limit, overloaded, server error, auth, no result), 2 bad arguments.
`;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs("parse", usage, {
    args: argv,
    allowPositionals: true,
    options: { "max-line-bytes": { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  if (typeof parsed === "number") return parsed;
  const [file, ...extra] = parsed.positionals;
  if (file === undefined || extra.length > 0) {
    process.stderr.write(usage);
    return EXIT.usage;
  }
  const maxRaw = parsed.values["max-line-bytes"];
  const maxLineBytes = maxRaw === undefined ? undefined : Number(maxRaw);
  if (maxLineBytes !== undefined && (!Number.isInteger(maxLineBytes) || maxLineBytes < 1)) {
    process.stderr.write(`turnstream parse: --max-line-bytes must be a positive integer\n`);
    return EXIT.usage;
  }
  const input = file === "-" ? process.stdin : createReadStream(file);
  const splitter = createLineSplitter({ maxLineBytes });
  const summarizer = new RunSummarizer();
  const take = (items: SplitItem[]): void => {
    for (const item of items) summarizer.add(parseItem(item));
  };
  try {
    for await (const chunk of input) take(splitter.push(chunk as Buffer));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    process.stderr.write(
      `turnstream parse: cannot read ${file === "-" ? "stdin" : file}${code ? ` (${code})` : ""}; check the path\n`,
    );
    return EXIT.usage;
  }
  take(splitter.end());
  const runSummary = summarizer.finish();
  process.stdout.write(JSON.stringify(runSummary) + "\n");
  return exitCodeOf(outcomeOfErrorKind(runSummary.errorKind));
}
