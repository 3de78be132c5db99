// `turnstream replay <session>`: rebuilds the read models from the log alone (never touching the
// live ones) and prints them, optionally as of an event or a moment, optionally following.
import {
  connectForCommand,
  createOutput,
  parseUntil,
  renderTranscriptText,
  replaySession,
  toMessages,
  type Output,
  type ProjectionState,
  type ReplayObserver,
  type Scrub,
  type Until,
  UnknownSessionError,
} from "../../projector/index.ts";
import { interruptSignal, parseCommandArgs, type ParsedArgs } from "./_args.ts";
import { exportSessionTraces } from "./_export-traces.ts";
import { defaultScrub } from "./_scrub.ts";
import { forTerminal } from "../../kernel/index.ts";
import type { SessionHistory } from "../../archive/index.ts";
import { ARCHIVE_FLAG_OPTIONS, ARCHIVE_FLAG_USAGE, logPrefix, openHistory, rejectSessionId } from "./_connect.ts";

export const summary = "rebuild a session's read models from its log (text, json or AI-SDK messages)";

const usage = `usage: turnstream replay <session> [--until SEQ|ISO-TIME] [--format text|json|messages]
                        [--follow] [--speed X] [--export-traces] [--prefix P] [--archive URL]
  Folds the session's event log from zero; the live read models are not read or written. A session
  retention moved out of Redis is read from the archive (--follow on it ends with its history).
  --until SEQ|TIME  the state as of event SEQ, or of the moment TIME (ISO 8601)
  --format F        text (transcript, default) | json (all read models) | messages (AI-SDK messages)
  --follow          go on with live events until interrupted (json/messages: one line per event)
  --speed X         replay with the original timing divided by X (default: no waiting)
  --export-traces   re-emit the session's spans from the log to the configured OTLP exporter
                    (OTEL_EXPORTER_OTLP_ENDPOINT …), for when the collector was down
  --prefix P        key prefix (default: TURNSTREAM_PREFIX or "ts:")
${ARCHIVE_FLAG_USAGE}  Redis from REDIS_URL (default redis://127.0.0.1:6379) or REDIS_CLUSTER_NODES.
`;

type Format = "text" | "json" | "messages";

/** Prints the replay: all at the end, or progressively when following or timed. */
function printer(out: Output, format: Format, progressive: boolean): ReplayObserver {
  let printed: string[] = [];
  let caughtUp = false;
  const text = (state: ProjectionState): void => {
    const lines = renderTranscriptText(state).split("\n");
    const samePrefix = printed.length <= lines.length && printed.every((l, i) => l === lines[i]);
    if (samePrefix) for (const line of lines.slice(printed.length)) out.line(line);
    else {
      out.line("── (transcript revised) ──");
      for (const line of lines) out.line(line);
    }
    printed = lines;
  };
  const doc = (state: ProjectionState, pretty: boolean): string => {
    const shown = format === "json" ? state : toMessages(state);
    return pretty ? JSON.stringify(shown, null, 2) : JSON.stringify(shown);
  };
  return {
    onEvent(_env, state) {
      if (!progressive) return;
      if (format === "text") text(state);
      else if (caughtUp) out.line(doc(state, false));
    },
    onCaughtUp(state) {
      caughtUp = true;
      if (progressive && format === "text") return;
      out.line(doc2(state));
    },
    onEnd() {},
  };
  function doc2(state: ProjectionState): string {
    if (format === "text") return renderTranscriptText(state);
    return doc(state, !progressive);
  }
}

const options = {
  until: { type: "string" },
  format: { type: "string", default: "text" },
  follow: { type: "boolean", default: false },
  speed: { type: "string" },
  "export-traces": { type: "boolean", default: false },
  prefix: { type: "string" },
  ...ARCHIVE_FLAG_OPTIONS,
  help: { type: "boolean", short: "h" },
} as const;

type ReplayValues = ParsedArgs<{ allowPositionals: true; options: typeof options }>["values"];

interface ReplayRequest {
  session: string;
  format: Format;
  until: Until | undefined;
  speed: number | undefined;
}

/** The checked arguments, or the exit code after saying on stderr what is wrong. */
function replayRequest(values: ReplayValues, positionals: string[]): ReplayRequest | number {
  const [session, ...extra] = positionals;
  if (session === undefined || extra.length > 0) {
    process.stderr.write(usage);
    return 2;
  }
  if (rejectSessionId("replay", session)) return 2;
  const format = values.format as Format;
  if (!["text", "json", "messages"].includes(format)) {
    process.stderr.write("turnstream replay: --format must be text, json or messages\n");
    return 2;
  }
  try {
    const until = values.until === undefined ? undefined : parseUntil(values.until);
    return { session, format, until, speed: speedOf(values.speed) };
  } catch (err) {
    process.stderr.write(`turnstream replay: ${(err as Error).message}\n`);
    return 2;
  }
}

function speedOf(flag: string | undefined): number | undefined {
  if (flag === undefined) return undefined;
  const speed = Number(flag);
  if (!(speed > 0) || !Number.isFinite(speed))
    throw new Error("--speed must be a number above 0, e.g. 2 for twice as fast");
  return speed;
}

/** --export-traces: re-emits the session's spans instead of printing the replay. */
async function exportTraces(history: SessionHistory, session: string, out: Output): Promise<number> {
  if (!(await history.stat(session)).exists) throw new UnknownSessionError(session, history.prefix);
  const exported = await exportSessionTraces({ log: history, session });
  if (!exported.enabled) {
    process.stderr.write(
      "turnstream replay: --export-traces needs a trace exporter: set OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER)\n",
    );
    return 2;
  }
  out.line(`exported ${exported.spans} spans of ${exported.attempts} attempt(s) of session ${session}`);
  await out.drain();
  return 0;
}

export async function run(argv: string[], scrub?: Scrub): Promise<number> {
  const args = parseCommandArgs("replay", usage, { args: argv, allowPositionals: true, options });
  if (typeof args === "number") return args;
  const { values } = args;
  const request = replayRequest(values, args.positionals);
  if (typeof request === "number") return request;
  const { session, format, until, speed } = request;
  const scrubText = scrub ?? defaultScrub();
  // The transcript is the model's and tools' text: shown to a person, its controls and bidi characters
  // are escaped (newlines and tabs kept); JSON escapes controls itself and stays machine-readable.
  const shown = format === "text" ? (s: string): string => forTerminal(scrubText(s), { multiline: true }) : scrubText;
  const out = createOutput(process.stdout, { scrub: shown });
  const redis = await connectForCommand();
  const interrupt = interruptSignal();
  let history: SessionHistory | undefined;
  try {
    history = await openHistory(redis, logPrefix(values.prefix), values.archive);
    if (values["export-traces"]) return await exportTraces(history, session, out);
    const imported = format === "text" ? await history.importedAt(session) : undefined;
    if (imported !== undefined) {
      out.line(`(imported session, ${imported}: this log is what an imported file said, not what a worker recorded)`);
    }
    const progressive = values.follow || speed !== undefined;
    const observers = [printer(out, format, progressive)];
    await replaySession(history, session, { until, speed, follow: values.follow, signal: interrupt.signal, observers });
    await out.drain();
    return 0;
  } catch (err) {
    if ((err as Error).name === "UnknownSessionError") {
      process.stderr.write(`turnstream replay: ${(err as Error).message}\n`);
      return 2; // a wrong id or prefix: a usage error (see ../exit-codes.ts), not a failed task
    }
    throw err;
  } finally {
    interrupt.release();
    await history?.close();
    redis.disconnect();
  }
}
