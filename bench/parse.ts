// `npm run bench -- parse [--mb N]`: the streaming parser (line splitter + parseLine) against a
// baseline of split("\n") + JSON.parse over the same bytes, in the same run. Each measurement runs
// in its own child process so its peak RSS is its own; the streaming parser is also measured at
// half the size to show its memory does not grow with the input.
import { spawn } from "node:child_process";
import {
  createReadStream,
  createWriteStream,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { once } from "node:events";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");

interface Measured {
  mode: string;
  bytes: number;
  lines: number;
  seconds: number;
  peakRssMb: number;
  known: number;
}

async function worker(mode: string, file: string): Promise<void> {
  const bytes = statSync(file).size;
  // Load the parser before the clock starts: module loading is not parsing.
  const protocol = mode === "stream" ? await import(join(root, "src/protocol/index.ts")) : undefined;
  const t0 = process.hrtime.bigint();
  let lines = 0;
  let known = 0;
  if (mode === "stream") {
    const { createLineSplitter, parseItem } = protocol;
    const splitter = createLineSplitter();
    for await (const chunk of createReadStream(file, { highWaterMark: 1 << 16 })) {
      for (const item of splitter.push(chunk)) {
        lines++;
        if (parseItem(item).category === "known") known++;
      }
    }
    for (const item of splitter.end()) {
      lines++;
      if (parseItem(item).category === "known") known++;
    }
  } else {
    // Baseline: the same stream decoded as text, split on "\n", every line JSON.parse'd.
    let rest = "";
    const stream = createReadStream(file, { highWaterMark: 1 << 16, encoding: "utf8" });
    for await (const chunk of stream) {
      const parts = (rest + (chunk as string)).split("\n");
      rest = parts.pop() ?? "";
      for (const part of parts) {
        if (part === "") continue;
        lines++;
        if (typeof JSON.parse(part) === "object") known++;
      }
    }
    if (rest !== "") {
      lines++;
      JSON.parse(rest);
      known++;
    }
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const peakRssMb = process.resourceUsage().maxRSS / 1024;
  const measured: Measured = { mode, bytes, lines, seconds, peakRssMb, known };
  process.stdout.write(JSON.stringify(measured) + "\n");
}

function sampleLines(): string[] {
  const dir = join(root, "test/fixtures/cli");
  const lines: string[] = [];
  if (existsSync(dir)) {
    for (const file of readdirSync(dir)
      .filter((f) => f.endsWith(".jsonl"))
      .sort()) {
      for (const line of readFileSync(join(dir, file), "utf8").split("\n")) if (line.trim() !== "") lines.push(line);
    }
  }
  return lines;
}

async function generate(file: string, targetBytes: number, lines: string[]): Promise<number> {
  const block = Buffer.from(lines.join("\n") + "\n");
  const out = createWriteStream(file);
  let written = 0;
  while (written < targetBytes) {
    if (!out.write(block)) await once(out, "drain");
    written += block.length;
  }
  out.end();
  await once(out, "finish");
  return written;
}

function measure(mode: string, file: string): Promise<Measured> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), "--worker", mode, file], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) reject(new Error(`bench worker ${mode} exited ${String(code)}`));
      else resolve(JSON.parse(out.trim().split("\n").at(-1)!) as Measured);
    });
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { worker: { type: "string" }, mb: { type: "string" }, reps: { type: "string" } },
    allowPositionals: true,
  });
  if (values.worker !== undefined) {
    const file = process.argv.at(-1)!;
    await worker(values.worker, file);
    return;
  }
  const mb = Number(values.mb ?? "110");
  const reps = Number(values.reps ?? "3");
  let lines = sampleLines();
  let source = "test/fixtures/cli/*.jsonl";
  if (lines.length === 0) {
    const samples = await import(join(root, "test/protocol/sample-lines.ts"));
    lines = samples.toolsRun as string[];
    source = "test/protocol/sample-lines.ts (no recorded fixtures found)";
  }
  const dir = mkdtempSync(join(tmpdir(), "bench-parse-"));
  try {
    const big = join(dir, "big.jsonl");
    const half = join(dir, "half.jsonl");
    const bigBytes = await generate(big, mb * 1e6, lines);
    const halfBytes = await generate(half, (mb / 2) * 1e6, lines);
    process.stdout.write(
      `input: ${lines.length} distinct lines from ${source}, repeated to ${(bigBytes / 1e6).toFixed(1)} MB ` +
        `(and ${(halfBytes / 1e6).toFixed(1)} MB)\n`,
    );
    let bestStream: Measured | undefined;
    let bestBase: Measured | undefined;
    for (let rep = 0; rep < reps; rep++) {
      // Alternate so machine noise hits both alike.
      const baseline = await measure("baseline", big);
      const stream = await measure("stream", big);
      process.stdout.write(
        `rep ${rep + 1}: baseline ${(baseline.bytes / 1e6 / baseline.seconds).toFixed(1)} MB/s, stream ${(stream.bytes / 1e6 / stream.seconds).toFixed(1)} MB/s\n`,
      );
      if (bestBase === undefined || baseline.seconds < bestBase.seconds) bestBase = baseline;
      if (bestStream === undefined || stream.seconds < bestStream.seconds) bestStream = stream;
    }
    const halfRun = await measure("stream", half);
    const stream = bestStream!;
    const baseline = bestBase!;
    if (stream.lines !== baseline.lines)
      throw new Error(`line counts differ: stream ${stream.lines}, baseline ${baseline.lines}`);
    const mbPerSec = stream.bytes / 1e6 / stream.seconds;
    const baselineMbPerSec = baseline.bytes / 1e6 / baseline.seconds;
    process.stdout.write(
      `lines: ${stream.lines} (${stream.known} known)\n` +
        `peak RSS, streaming: ${halfRun.peakRssMb.toFixed(0)} MB at ${(halfRun.bytes / 1e6).toFixed(0)} MB input, ` +
        `${stream.peakRssMb.toFixed(0)} MB at ${(stream.bytes / 1e6).toFixed(0)} MB input; baseline ${baseline.peakRssMb.toFixed(0)} MB\n`,
    );
    const out = {
      bench: "parse",
      mbPerSec: Number(mbPerSec.toFixed(1)),
      baselineMbPerSec: Number(baselineMbPerSec.toFixed(1)),
      ratio: Number((mbPerSec / baselineMbPerSec).toFixed(3)),
      peakRssMb: Number(stream.peakRssMb.toFixed(1)),
      peakRssMbHalfInput: Number(halfRun.peakRssMb.toFixed(1)),
      inputMb: Number((stream.bytes / 1e6).toFixed(1)),
    };
    process.stdout.write(JSON.stringify(out) + "\n");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
