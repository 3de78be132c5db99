// `turnstream parse FILE|-`: summarises a stream-json transcript (raw CLI stdout) as one JSON object.
// The input is streamed through the line splitter, so memory stays bounded for any size.
import { createReadStream } from "node:fs";
import { parseArgs } from "node:util";
import { createLineSplitter, parseItem, RunSummarizer, type SplitItem } from "../../protocol/index.ts";

export const summary = "summarise a stream-json transcript (file or - for stdin) as one JSON object";

const usage = "usage: turnstream parse [--max-line-bytes N] FILE|-\n";

export async function run(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { "max-line-bytes": { type: "string" }, help: { type: "boolean", short: "h" } },
    });
  } catch (err) {
    process.stderr.write(`turnstream parse: ${err instanceof Error ? err.message : String(err)}\n${usage}`);
    return 2;
  }
  if (parsed.values.help === true) {
    process.stdout.write(usage);
    return 0;
  }
  const [file, ...extra] = parsed.positionals;
  if (file === undefined || extra.length > 0) {
    process.stderr.write(usage);
    return 2;
  }
  const maxRaw = parsed.values["max-line-bytes"];
  const maxLineBytes = maxRaw === undefined ? undefined : Number(maxRaw);
  if (maxLineBytes !== undefined && (!Number.isInteger(maxLineBytes) || maxLineBytes < 1)) {
    process.stderr.write(`turnstream parse: --max-line-bytes must be a positive integer\n`);
    return 2;
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
    process.stderr.write(`turnstream parse: cannot read ${file === "-" ? "stdin" : file}${code ? ` (${code})` : ""}\n`);
    return 1;
  }
  take(splitter.end());
  process.stdout.write(JSON.stringify(summarizer.finish()) + "\n");
  return 0;
}
