// Telemetry overhead on ingest: 100,000 realistic cli.line events through the event log's writer,
// with telemetry and scrubbing on against off, alternating in the same run on the same Redis. "On"
// is the worker's own path for a stdout line: the raw text is scrubbed of the 20 known secret
// values and the built-in secret shapes (as the worker's line scrubber does: its patterns keep a
// JSON line valid), the scrubbed text is appended, and the event is shown to the attempt's spans
// (attemptSpansObserver, as the worker shows every event it writes to its observers), which are
// exported in batches through the RedactingSpanExporter (the full scrubber, patterns too) to an
// exporter that drops them: no network. Ratio = on rate / off rate (best of the rounds of each); a third mode
// scrubs lines but builds no spans, to tell the scrubber's share of the cost from the spans'.
// Lines are parsed once before timing: in the worker the CLI runner parses every line whether
// telemetry is on or not (runTurn yields ParsedLine), and the spans take that parse (they parse a
// line again only when the line scrubber changed its text).
// Then the CLI's own spans and metrics (_cli-spans.ts): worker CPU per turn with them joined into the attempt's
// trace against TURNSTREAM_CLI_TELEMETRY=off (goal ≤ 1.10), with a stand-in CLI posting a one-tool turn's
// telemetry (standInCliSpansCpuRatio) and with the real CLI (cliSpansCpuRatio; the stand-in's with --cli-real 0).
// Options: --events N, --rounds N, --url redis://… (default: a private redis-server for the run),
// --cli-turns N, --cli-rounds N, --cli-only (skip the ingest part), --cli-real N (N turns a round with
// the real CLI as well: its ratio is realCliSpansCpuRatio; 0 skips it).
import { parseArgs } from "node:util";
import { randomBytes } from "node:crypto";
import { ExportResultCode, type ExportResult } from "@opentelemetry/core";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace-base";
import { parseLine, type ParsedLine } from "../src/protocol/index.ts";
import type { AttemptObserver, ObservedEvent } from "../src/events/index.ts";
import { createEventLog, createWriter, type EventInput } from "../src/log/index.ts";
import { attemptSpansObserver, createScrubber, startTelemetry } from "../src/telemetry/index.ts";
import { benchRedis } from "./_redis.ts";
import { textSource, WORDS as words } from "./_text.ts";
import { measureCliSpans } from "./_cli-spans.ts";

const { values } = parseArgs({
  options: {
    events: { type: "string", default: "100000" },
    rounds: { type: "string", default: "5" },
    url: { type: "string" },
    "cli-turns": { type: "string", default: "40" },
    "cli-rounds": { type: "string", default: "5" },
    "cli-only": { type: "boolean", default: false },
    "cli-real": { type: "string", default: "24" },
  },
});
const total = Number(values.events);
const rounds = Number(values.rounds);

// Deterministic pseudo-random sizes so runs are comparable.
const { rand, text } = textSource(0x2545f491);

const secrets: Record<string, string> = {};
for (let secretIndex = 0; secretIndex < 20; secretIndex++) {
  const kind = secretIndex % 4;
  secrets[`SECRET_${secretIndex}`] =
    kind === 0
      ? `sk-ant-api03-${randomBytes(24).toString("base64url")}`
      : kind === 1
        ? `ghp_${randomBytes(18).toString("hex")}`
        : kind === 2
          ? randomBytes(16).toString("hex")
          : `xoxb-${randomBytes(12).toString("hex")}`;
}
const secretList = Object.values(secrets);

const sessionId = "7d2c1b9e-8d7a-4e6b-9c3d-2a1b0f9e8d7c";
const model = "claude-sonnet-4-5";
// A long agentic run: init, then steps of (sometimes text) + tool_use + tool_result, a hook pair now
// and then, a rare retry, one result at the end. Tool outputs carry a secret once in a while.
function makeLines(count: number): string[] {
  const out: string[] = [
    JSON.stringify({
      type: "system",
      subtype: "init",
      cwd: "/work/repo",
      session_id: sessionId,
      tools: ["Bash", "Read", "Edit"],
      model,
      permissionMode: "default",
      claude_code_version: "2.1.332",
    }),
  ];
  let step = 0;
  while (out.length < count - 1) {
    step++;
    const id = `msg_${step.toString(36).padStart(8, "0")}`;
    const toolId = `toolu_${step.toString(36).padStart(16, "0")}`;
    const roll = rand();
    if (roll < 0.5) {
      out.push(
        JSON.stringify({
          type: "assistant",
          message: {
            id,
            type: "message",
            role: "assistant",
            model,
            content: [{ type: "text", text: text(200 + Math.floor(rand() * 600)) }],
            stop_reason: null,
            usage: { input_tokens: 3, output_tokens: 12 },
          },
          parent_tool_use_id: null,
          session_id: sessionId,
        }),
      );
    }
    const cmd = `grep -rn "${words[step % words.length]}" src | head -${1 + (step % 40)}`;
    out.push(
      JSON.stringify({
        type: "assistant",
        message: {
          id,
          type: "message",
          role: "assistant",
          model,
          content: [
            {
              type: "tool_use",
              id: toolId,
              name: step % 5 === 0 ? "Read" : "Bash",
              input: { command: cmd, description: "search" },
            },
          ],
          stop_reason: null,
          usage: { input_tokens: 3, output_tokens: 30 },
        },
        parent_tool_use_id: null,
        session_id: sessionId,
      }),
    );
    if (step % 25 === 0) {
      out.push(
        JSON.stringify({
          type: "system",
          subtype: "hook_started",
          hook_id: `h${step}`,
          hook_name: "PreToolUse:Bash",
          hook_event: "PreToolUse",
          session_id: sessionId,
        }),
      );
      out.push(
        JSON.stringify({
          type: "system",
          subtype: "hook_response",
          hook_id: `h${step}`,
          hook_name: "PreToolUse:Bash",
          hook_event: "PreToolUse",
          output: "",
          stdout: "",
          stderr: "",
          exit_code: 0,
          outcome: "success",
          session_id: sessionId,
        }),
      );
    }
    if (step % 997 === 0)
      out.push(
        JSON.stringify({
          type: "system",
          subtype: "api_retry",
          attempt: 1,
          max_retries: 10,
          retry_delay_ms: 500,
          error_status: 529,
          error: "overloaded",
          session_id: sessionId,
        }),
      );
    const size = rand() < 0.7 ? 300 + Math.floor(rand() * 1200) : 1500 + Math.floor(rand() * 2500);
    let body = text(size);
    if (step % 500 === 0) body += ` token=${secretList[step % secretList.length]}`;
    const isError = step % 40 === 0;
    out.push(
      JSON.stringify({
        type: "user",
        message: {
          role: "user",
          content: [{ tool_use_id: toolId, type: "tool_result", content: body, is_error: isError }],
        },
        parent_tool_use_id: null,
        session_id: sessionId,
        tool_use_result: isError
          ? `Error: ${body.slice(0, 80)}`
          : { stdout: body.slice(0, 100), stderr: "", interrupted: false },
      }),
    );
  }
  out.length = Math.min(out.length, count - 1);
  out.push(
    JSON.stringify({
      type: "result",
      subtype: "success",
      is_error: false,
      result: "done",
      session_id: sessionId,
      num_turns: step,
      total_cost_usd: 12.5,
      usage: {
        input_tokens: 1000,
        output_tokens: 5000,
        cache_read_input_tokens: 200000,
        cache_creation_input_tokens: 3000,
      },
      modelUsage: {
        [model]: {
          inputTokens: 1000,
          outputTokens: 5000,
          cacheReadInputTokens: 200000,
          cacheCreationInputTokens: 3000,
          costUSD: 12.5,
        },
      },
      permission_denials: [],
    }),
  );
  return out;
}

/** Accepts every batch and drops it: what is measured is our side, not a network. */
class DroppingExporter implements SpanExporter {
  spans = 0;
  export(spans: ReadableSpan[], done: (exportResult: ExportResult) => void): void {
    this.spans += spans.length;
    done({ code: ExportResultCode.SUCCESS });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }
}

const lines = makeLines(total);
const parsedLines = lines.map(parseLine);
const lineBytes = lines.reduce((a, l) => a + Buffer.byteLength(l), 0);

const store = await benchRedis(values.url);
const { redis } = store;
const prefix = `bench:${randomBytes(4).toString("hex")}:`;
const log = createEventLog({ redis, prefix });
let runNo = 0;

type Mode = "off" | "scrub" | "on";

async function ingest(
  items: string[],
  parsed: readonly ParsedLine[],
  mode: Mode,
): Promise<{ ms: number; spans: number; redacted: number }> {
  const withTelemetry = mode === "on";
  const session = `bench-tel-${runNo++}-${randomBytes(3).toString("hex")}`;
  const exporter = new DroppingExporter();
  const scrubber = createScrubber({ values: secrets });
  const lineScrubber = createScrubber({ values: secrets });
  const telemetry = withTelemetry ? startTelemetry({ scrubber, exporter, env: {} }) : undefined;
  let redacted = 0;
  const t0 = performance.now();
  const { epoch, attempt } = await log.beginAttempt(session, "turn-1");
  const writer = createWriter({ log, session, epoch, maxBatchEvents: 1024, maxBatchBytes: 4 * 1024 * 1024 });
  const startedAt = new Date().toISOString();
  const spans: AttemptObserver | undefined = telemetry
    ? attemptSpansObserver({ tracer: telemetry.tracer }).attempt({
        session,
        turn: "turn-1",
        attempt,
        epoch,
        traceparent: undefined,
        requestModel: undefined,
        startedAt,
        scrub: (text, field) => scrubber.scrub(text, { sink: "span", field }),
      })
    : undefined;
  // The worker's write: the event is shown to the observers, then buffered for the append.
  const write = async (kind: string, data: unknown, at: string, line?: ParsedLine): Promise<void> => {
    const event: EventInput = { turn: "turn-1", attempt, kind, data, at };
    const observed: ObservedEvent = { session, turn: "turn-1", attempt, epoch, kind, at, data };
    spans?.onEvent(observed, line);
    await writer.write(event);
  };
  await write("attempt.started", { worker: "bench", attempt, cwd: "/work/repo", trace: spans?.trace }, startedAt);
  for (let itemIndex = 0; itemIndex < items.length; itemIndex++) {
    let raw = items[itemIndex]!;
    if (mode !== "off") {
      const safe = lineScrubber.scrub(raw, { sink: "log", field: "cli.line" });
      if (safe !== raw) redacted++;
      raw = safe;
    }
    await write("cli.line", { raw }, new Date().toISOString(), parsed[itemIndex]);
  }
  await write("turn.finished", { attempt }, new Date().toISOString());
  await writer.close();
  await telemetry?.forceFlush();
  const ms = performance.now() - t0;
  await telemetry?.shutdown();
  const stat = await log.stat(session);
  if (stat.lastSeq !== items.length + 2)
    throw new Error(`log has ${stat.lastSeq} events, expected ${items.length + 2}`);
  await log.destroy(session);
  return { ms, spans: exporter.spans, redacted };
}

/** The ingest part: its figures, printed, and the fields of the last JSON line. */
async function ingestBench(): Promise<Record<string, number>> {
  const priming = lines.slice(0, 5000);
  for (const primingMode of ["off", "scrub", "on"] as const) await ingest(priming, parsedLines, primingMode);
  let offBest = Infinity;
  let scrubBest = Infinity;
  let onBest = Infinity;
  let spans = 0;
  let redacted = 0;
  // The order rotates each round so no mode always runs first (cold) or last (after GC pressure).
  const modes = ["off", "scrub", "on"] as const;
  for (let roundIndex = 0; roundIndex < rounds; roundIndex++) {
    for (let offset = 0; offset < modes.length; offset++) {
      const runMode = modes[(roundIndex + offset) % modes.length]!;
      const res = await ingest(lines, parsedLines, runMode);
      if (runMode === "off") offBest = Math.min(offBest, res.ms);
      else if (runMode === "scrub") scrubBest = Math.min(scrubBest, res.ms);
      else {
        onBest = Math.min(onBest, res.ms);
        spans = res.spans;
        redacted = res.redacted;
      }
    }
  }
  const offPerSec = Math.round(total / (offBest / 1000));
  const onPerSec = Math.round(total / (onBest / 1000));
  const scrubPerSec = Math.round(total / (scrubBest / 1000));
  process.stdout.write(
    `events ${total}, mean line ${Math.round(lineBytes / total)} B, ${Object.keys(secrets).length} secrets, rounds ${rounds}\n` +
      `off   ${offBest.toFixed(0)} ms  ${offPerSec}/s\n` +
      `scrub ${scrubBest.toFixed(0)} ms  ${scrubPerSec}/s  (line scrubbing only, no spans)\n` +
      `on    ${onBest.toFixed(0)} ms  ${onPerSec}/s  ${spans} spans exported, ${redacted} lines had a secret\n`,
  );
  return {
    ratio: Number((onPerSec / offPerSec).toFixed(3)),
    scrubOnlyRatio: Number((scrubPerSec / offPerSec).toFixed(3)),
    onPerSec,
    scrubPerSec,
    offPerSec,
    spans,
    redactedLines: redacted,
    events: total,
  };
}

try {
  const ingested = values["cli-only"] ? {} : await ingestBench();
  const cli = await measureCliSpans(Number(values["cli-turns"]), Number(values["cli-rounds"]));
  process.stdout.write(
    `cli spans: on ${cli.onCpuMsPerTurn} ms/turn, off ${cli.offCpuMsPerTurn} ms/turn of worker CPU, ` +
      `${cli.payloadBytes} B per turn from the CLI, ${cli.cliSpansExported} CLI spans exported in the last round\n`,
  );
  const realTurns = Number(values["cli-real"]);
  const real = realTurns > 0 ? await measureCliSpans(realTurns, 3, true) : undefined;
  if (real !== undefined)
    process.stdout.write(
      `real CLI: on ${real.onCpuMsPerTurn} ms/turn, off ${real.offCpuMsPerTurn} ms/turn of worker CPU, ` +
        `${real.cliSpansExported} CLI spans exported in the last round\n`,
    );
  // The headline is the real CLI's (its model call goes through the worker's gateway, as in production);
  // the stand-in's, a heavier payload over a turn that costs the worker less, is kept beside it.
  const standIn = {
    standInCliSpansCpuRatio: cli.cliSpansCpuRatio,
    standInOnCpuMsPerTurn: cli.onCpuMsPerTurn,
    standInOffCpuMsPerTurn: cli.offCpuMsPerTurn,
    standInPayloadBytes: cli.payloadBytes,
    standInMetricsPayloadBytes: cli.metricsPayloadBytes,
    standInCliSpansExported: cli.cliSpansExported,
  };
  const headline = real ?? cli;
  const measured = {
    cliSpansCpuRatio: headline.cliSpansCpuRatio,
    onCpuMsPerTurn: headline.onCpuMsPerTurn,
    offCpuMsPerTurn: headline.offCpuMsPerTurn,
    cliSpansExported: headline.cliSpansExported,
    realCli: real !== undefined,
    goalCliSpansCpuRatio: 1.1,
  };
  process.stdout.write(JSON.stringify({ bench: "telemetry", ...ingested, ...standIn, ...measured }) + "\n");
} finally {
  await store.close();
}
