// `turnstream export <session> [FILE]`: writes a session out (stdout without FILE): its event log as
// JSONL, its conversation as an ATIF trajectory, or its spans as OTLP/JSON.
import { createWriteStream, type WriteStream } from "node:fs";
import { once } from "node:events";
import { finished } from "node:stream/promises";
import type { SessionHistory } from "../../archive/index.ts";
import { packageVersion } from "../../kernel/index.ts";
import { exportJsonl } from "../../log/index.ts";
import { AtifFacts, connectForCommand, replaySession, toAtif } from "../../projector/index.ts";
import { otlpJson } from "../../telemetry/index.ts";
import { parseCommandArgs } from "./_args.ts";
import { ARCHIVE_FLAG_OPTIONS, ARCHIVE_FLAG_USAGE, logPrefix, openHistory, rejectSessionId } from "./_connect.ts";
import { collectSessionTraces } from "./_export-traces.ts";
import { defaultScrubber } from "./_scrub.ts";

export const summary = "write a session out: its event log as JSONL, an ATIF trajectory, or its spans as OTLP/JSON";

const usage = `usage: turnstream export <session> [FILE] [--format jsonl|atif|otlp-json] [--capture-content]
                        [--prefix P] [--archive URL]
  Writes <session> to FILE (default: stdout), from Redis or, for a session retention moved out of
  Redis, from the archive.
  --format F        jsonl (default): every event as one JSON envelope per line, as the log holds it
                    (what \`turnstream import\` loads back)
                    atif: the conversation as an ATIF trajectory (Agent Trajectory Interchange Format,
                    ATIF-v1.7): the prompts, one agent step per model response with its tool calls, their
                    results and its token counts, API errors, subagents embedded; totals and cost at the end
                    otlp-json: the session's spans (those \`replay --export-traces\` sends) as one OTLP/JSON
                    ExportTraceServiceRequest, for a trace UI or an OTLP/HTTP endpoint
  --capture-content with otlp-json: record tool arguments and tool error texts in the spans
  atif and otlp-json are scrubbed of this environment's secret-looking variables and of known secret
  shapes (the log itself was scrubbed when it was written). otlp-json's resource comes from
  OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
  Redis from REDIS_URL (default redis://127.0.0.1:6379) or REDIS_CLUSTER_NODES.
  --prefix P        key prefix (default: TURNSTREAM_PREFIX or "ts:")
${ARCHIVE_FLAG_USAGE}`;

const FORMATS = ["jsonl", "atif", "otlp-json"] as const;
type Format = (typeof FORMATS)[number];

const options = {
  format: { type: "string", default: "jsonl" },
  "capture-content": { type: "boolean", default: false },
  prefix: { type: "string" },
  ...ARCHIVE_FLAG_OPTIONS,
  help: { type: "boolean", short: "h" },
} as const;

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("export", usage, { args: argv, allowPositionals: true, options });
  if (typeof args === "number") return args;
  const { values, positionals } = args;
  const [session, file, ...extra] = positionals;
  if (session === undefined || extra.length > 0) {
    process.stderr.write(usage);
    return 2;
  }
  if (rejectSessionId("export", session)) return 2;
  const format = values.format as Format;
  if (!FORMATS.includes(format)) {
    process.stderr.write(`turnstream export: --format must be ${FORMATS.join(", ")}\n`);
    return 2;
  }
  if (values["capture-content"] && format !== "otlp-json") {
    process.stderr.write("turnstream export: --capture-content goes with --format otlp-json\n");
    return 2;
  }
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
    let said: string;
    if (format === "jsonl") said = `exported ${await exportJsonl(history, session, out)} events of ${session}`;
    else if (format === "atif") said = await writeAtif(history, session, out);
    else said = await writeOtlpJson(history, session, out, values["capture-content"]);
    if (out !== process.stdout) {
      (out as WriteStream).end();
      await finished(out);
    }
    process.stderr.write(`${said}\n`);
    return 0;
  } finally {
    await history?.close();
    redis.disconnect();
  }
}

/** Writes `text` and waits for the stream to take it. */
async function write(out: NodeJS.WritableStream, text: string): Promise<void> {
  if (!out.write(text)) await once(out, "drain");
}

async function writeAtif(history: SessionHistory, session: string, out: NodeJS.WritableStream): Promise<string> {
  const facts = new AtifFacts();
  const state = await replaySession(history, session, { observers: [facts] });
  const trajectory = defaultScrubber().scrubDeep(toAtif(state, facts, { runnerVersion: packageVersion() }), {
    sink: "export",
  });
  await write(out, `${JSON.stringify(trajectory, null, 2)}\n`);
  return `exported ${trajectory.steps.length} steps of ${session} as an ATIF trajectory`;
}

async function writeOtlpJson(
  history: SessionHistory,
  session: string,
  out: NodeJS.WritableStream,
  captureContent: boolean,
): Promise<string> {
  // The spans go through the redacting exporter on their way here, as they do on the way to a collector.
  const { spans, attempts } = await collectSessionTraces({
    log: history,
    session,
    scrubber: defaultScrubber(),
    captureContent,
  });
  await write(out, `${otlpJson(spans)}\n`);
  return `exported ${spans.length} spans of ${attempts} attempt(s) of ${session} as OTLP/JSON`;
}
