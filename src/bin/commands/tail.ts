// `turnstream tail <session>`: a session's events as they arrive, one short line each.
import type { SessionHistory } from "../../archive/index.ts";
import type { Envelope } from "../../log/index.ts";
import {
  connectForCommand,
  createOutput,
  paint,
  summarizeEvent,
  type Output,
  type Scrub,
} from "../../projector/index.ts";
import { interruptSignal, parseCommandArgs } from "./_args.ts";
import { defaultScrub } from "./_scrub.ts";
import { forTerminal } from "../../kernel/index.ts";
import { ARCHIVE_FLAG_OPTIONS, ARCHIVE_FLAG_USAGE, logPrefix, openHistory, rejectSessionId } from "./_connect.ts";

export const summary = "print a session's events (seq, kind, summary), optionally following live";

const usage = `usage: turnstream tail <session> [--follow] [--json] [--from SEQ] [--prefix P] [--archive URL]
  --follow          keep printing new events until interrupted (an archived session has ended:
                    its events, then the end)
  --json            one envelope per line instead of a summary
  --from SEQ        start at this event (default 1)
  --prefix P        key prefix (default: TURNSTREAM_PREFIX or "ts:")
${ARCHIVE_FLAG_USAGE}  Colour only on a terminal, and never when NO_COLOR is set.
  Redis from REDIS_URL (default redis://127.0.0.1:6379) or REDIS_CLUSTER_NODES.
`;

const kindStyle = (kind: string): "dim" | "red" | "green" | "yellow" | "blue" | "magenta" | "cyan" => {
  if (kind === "turn.failed" || kind === "attempt.abandoned") return "red";
  if (kind === "turn.finished") return "green";
  if (kind.startsWith("decision.") || kind.startsWith("rule.")) return "magenta";
  if (kind === "cli.line") return "cyan";
  if (kind.startsWith("turn.") || kind.startsWith("attempt.")) return "yellow";
  return "blue";
};

/**
 * The data with every string scrubbed. A summary cuts text short, and a token cut short no longer
 * has its shape, so the output's own scrub would let its first characters through: scrub, then cut.
 */
function scrubbedData(value: unknown, scrub: Scrub): unknown {
  if (typeof value === "string") return scrub(value);
  if (Array.isArray(value)) return value.map((v) => scrubbedData(v, scrub));
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, scrubbedData(v, scrub)]));
}

export function formatEvent(env: Envelope, color: boolean, scrub: Scrub): string {
  const at = env.at.length >= 23 ? env.at.slice(11, 23) : env.at;
  const who = env.turn === "" ? "" : ` ${forTerminal(env.turn)}#${env.attempt}`;
  // The log's text is a model's, a tool's or a Redis writer's: escaped before any colour is added.
  const summary = forTerminal(summarizeEvent({ kind: env.kind, data: scrubbedData(env.data, scrub) }));
  return `${paint(color, "dim", String(env.seq).padStart(6))} ${paint(color, "dim", at)} ${paint(color, kindStyle(env.kind), forTerminal(env.kind))}${who}${summary === "" ? "" : ` ${summary}`}`;
}

const options = {
  follow: { type: "boolean", short: "f", default: false },
  json: { type: "boolean", default: false },
  from: { type: "string" },
  prefix: { type: "string" },
  ...ARCHIVE_FLAG_OPTIONS,
  help: { type: "boolean", short: "h" },
} as const;

/** The session and first seq to print, or the exit code after saying what is wrong. */
function tailTarget(positionals: string[], fromFlag: string | undefined): { session: string; from: number } | number {
  const [session, ...extra] = positionals;
  if (session === undefined || extra.length > 0) {
    process.stderr.write(usage);
    return 2;
  }
  if (rejectSessionId("tail", session)) return 2;
  const from = fromFlag === undefined ? 1 : Number(fromFlag);
  if (!Number.isSafeInteger(from) || from < 1) {
    process.stderr.write("turnstream tail: --from must be a positive event number\n");
    return 2;
  }
  return { session, from };
}

interface TailRun {
  history: SessionHistory;
  session: string;
  from: number;
  follow: boolean;
  signal: AbortSignal;
  /** Prints one event. */
  print: (env: Envelope) => void;
  out: Output;
}

/** Prints the session's events: the history, or (following) everything from `from` on until the signal aborts. */
async function printEvents(tail: TailRun): Promise<number> {
  const home = await tail.history.home(tail.session);
  if (home === undefined && !tail.follow) {
    process.stderr.write(
      `turnstream tail: session ${tail.session} has no events under key prefix "${tail.history.prefix}"; check the id (turnstream sessions), --prefix or --archive\n`,
    );
    return 2; // a wrong id or prefix: a usage error (see ../exit-codes.ts), not a failed task
  }
  if (tail.follow && home === "archive") {
    // Retention archives only sessions that ended: nothing more will come to follow.
    for await (const env of tail.history.read(tail.session, { fromSeq: tail.from })) tail.print(env);
    await tail.out.drain();
    const where = tail.history.archive?.location ?? "the archive";
    process.stderr.write(
      `turnstream tail: session ${tail.session} has ended and is archived (${where}); not following\n`,
    );
  } else if (tail.follow) {
    const st = await tail.history.stat(tail.session);
    if (!st.exists)
      process.stderr.write(`turnstream tail: session ${tail.session} has no events yet; waiting for the first\n`);
    for await (const env of tail.history.tail(tail.session, { fromSeq: tail.from, signal: tail.signal, blockMs: 1000 }))
      tail.print(env);
  } else {
    for await (const env of tail.history.read(tail.session, { fromSeq: tail.from })) {
      tail.print(env);
      await tail.out.drain();
    }
  }
  await tail.out.drain();
  return 0;
}

export async function run(argv: string[], scrub?: Scrub): Promise<number> {
  const args = parseCommandArgs("tail", usage, { args: argv, allowPositionals: true, options });
  if (typeof args === "number") return args;
  const { values } = args;
  const target = tailTarget(args.positionals, values.from);
  if (typeof target === "number") return target;
  const scrubText = scrub ?? defaultScrub();
  const out = createOutput(process.stdout, { scrub: scrubText });
  const redis = await connectForCommand();
  const interrupt = interruptSignal();
  let history: SessionHistory | undefined;
  try {
    history = await openHistory(redis, logPrefix(values.prefix), values.archive);
    const print = (env: Envelope): void =>
      out.line(values.json ? JSON.stringify(env) : formatEvent(env, out.color, scrubText));
    return await printEvents({
      history,
      session: target.session,
      from: target.from,
      follow: values.follow,
      signal: interrupt.signal,
      print,
      out,
    });
  } finally {
    interrupt.release();
    await history?.close();
    redis.disconnect();
  }
}
