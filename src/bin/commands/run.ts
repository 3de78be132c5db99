// `turnstream run`: enqueue one turn; with --wait, follow it live and exit by its outcome (see
// ../exit-codes.ts), so a pipeline can tell "the agent failed the task" from "retry this job". A
// supervised turn that parks on a call is said on stderr with the command that decides it; the wait
// goes on, or with --exit-on-park ends at once (exit 5). What it says of the turn at the end is the
// per-turn report `batch` writes too (../reports/turn-result.ts). Ctrl-C or SIGTERM while it follows
// the turn says so, and how to cancel the turn (or, with --cancel-on-interrupt, cancels it), and exits
// 130 or 143 as a shell would report the signal.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { forTerminal, TurnstreamError, withTimeout } from "../../kernel/index.ts";
import { explainRedisError, redisUrlForDisplay, type Envelope } from "../../log/index.ts";
import { connectForCommand, type Scrub } from "../../projector/index.ts";
import {
  InvalidTurnError,
  liveWorkerCount,
  MissingVariableError,
  noWorkerWarning,
  WaitTimeoutError,
  type CancelResult,
  type EnqueueInput,
  type EnqueueResult,
  type Producer,
  type TurnResult,
} from "../../queue/index.ts";
import { EXIT, EXIT_ON_SIGNAL, exitCodeOf, type Outcome, type StopSignal } from "../exit-codes.ts";
import { TurnProgress } from "../reports/progress.ts";
import { endingOf, secondsText, turnReport, type TurnReport } from "../reports/turn-result.ts";
import { producerWithArchive } from "./_archive.ts";
import { Interrupted, interruptSignal, parseCommandArgs, type ParsedArgs } from "./_args.ts";
import {
  ARCHIVE_FLAG_OPTIONS,
  ARCHIVE_FLAG_USAGE,
  QUEUE_FLAG_OPTIONS,
  QUEUE_FLAGS_USAGE,
  queueConfigOf,
  readStdin,
} from "./_connect.ts";
import { BadDurationError, durationFlag } from "./_duration.ts";
import { followTurn } from "./_follow.ts";
import { ParkWatch, parkedNotice, TurnParkedStop, type ParkedView } from "./_parked.ts";
import { defaultScrub } from "./_scrub.ts";

export const summary = "enqueue a turn (--wait: follow it live and exit with its outcome)";

const usage = `usage: turnstream run [--session S] [--cwd DIR] [--check-cwd] [--wait] [--exit-on-park] [--cancel-on-interrupt] [--json]
                      [--supervised] [--model M] [--max-turns N]
                      [--allowed-tools A,B] [--idempotency-key K] [--var key=value …] [--tenant T] [--label name=value …]
                      [--limit name=N …] [--timeout D] [--turn-timeout D] [--start-timeout D] [--archive URL]
                      [--prefix P] [--queue-prefix Q] [--queue NAME]
                      [--] PROMPT | --prompt-file FILE | (prompt on stdin)
  --wait             follow the turn live and exit with its outcome: 0 finished, 1 the agent failed the task,
                     2 usage, 3 infrastructure (retry the job), 4 cancelled or timed out, 6 the tenant is over
                     its budget (not worth retrying now; see \`turnstream tenants\`); when a supervised
                     turn parks on a call, stderr says what it waits on and how to decide it, and the wait goes on
                     Ctrl-C or SIGTERM while waiting: exit 130 or 143 (128 + the signal's number, as a shell
                     reports it), saying how to cancel the turn, which goes on running
  --exit-on-park     with --wait: exit 5 as soon as the turn parks (it waits for its decision, holding nothing,
                     and resumes on a worker once decided); --json says "status":"parked" with the request
  --cancel-on-interrupt
                     with --wait: on Ctrl-C or SIGTERM, cancel the turn before exiting (a cancelled CI job
                     leaves no turn running)
  --json             one JSON object on stdout, whatever happens: outcome, exitCode, and the turn's report
                     (status, message, attempts, toolCalls, seconds, costUsd, tokens, resultText)
  --timeout D        stop waiting after D (exit 4; the turn goes on); D is 30s, 10m, 1h or milliseconds
  --timeout-ms MS    the same as --timeout, kept for existing scripts
  --turn-timeout D   the worker ends the turn itself after D (its timeoutMs)
  --tenant T         whose turn it is (a repository, team or customer): its limits and budget apply, and it
                     shares the fleet fairly with other tenants; a session's first turn fixes it
  --label name=value a label for fleet questions (repo, pr, team…); repeat it; recorded in the log
  --limit name=N     a lower bound than the worker's for this turn: pids, memoryMb, cpus or scratchMb
                     (repeat it; more than the worker's maximum fails the turn, naming it)
  --start-timeout D  exit 3 (and cancel the turn) when no worker has taken it within D
  --check-cwd        refuse (exit 2) a cwd that is not a directory here, for a host that shares the workers'
                     files; workers refuse such a turn anyway (failed, bad_cwd, exit 2)
  --supervised       each risky tool call waits for \`turnstream decide\` (or a trust rule); see \`turnstream pending\`;
                     a call nobody answers within the worker's answer window parks the turn until decided
${ARCHIVE_FLAG_USAGE}${QUEUE_FLAGS_USAGE}A prompt given after -- is visible to other local users in the process list while this command runs;
prefer --prompt-file or stdin for anything sensitive.
`;

const options = {
  session: { type: "string" },
  cwd: { type: "string" },
  "check-cwd": { type: "boolean" },
  wait: { type: "boolean" },
  "exit-on-park": { type: "boolean" },
  "cancel-on-interrupt": { type: "boolean" },
  supervised: { type: "boolean" },
  json: { type: "boolean" },
  model: { type: "string" },
  "max-turns": { type: "string" },
  "allowed-tools": { type: "string" },
  "idempotency-key": { type: "string" },
  var: { type: "string", multiple: true },
  label: { type: "string", multiple: true },
  tenant: { type: "string" },
  limit: { type: "string", multiple: true },
  timeout: { type: "string" },
  "timeout-ms": { type: "string" },
  "turn-timeout": { type: "string" },
  "start-timeout": { type: "string" },
  "prompt-file": { type: "string" },
  ...QUEUE_FLAG_OPTIONS,
  ...ARCHIVE_FLAG_OPTIONS,
  help: { type: "boolean", short: "h" },
} as const;

type RunArgs = ParsedArgs<{ allowPositionals: true; options: typeof options }>;
type RunValues = RunArgs["values"];

/** A mistake in the command line found after parsing: exit 2. */
class RunUsageError extends TurnstreamError {
  constructor(message: string) {
    super(message, { code: "usage" });
  }
}

/** No worker took the turn within --start-timeout: exit 3. */
class NoWorkerInTimeError extends TurnstreamError {
  constructor(message: string) {
    super(message, { code: "no_worker_in_time" });
  }
}

interface Timeouts {
  waitMs: number | undefined;
  turnMs: number | undefined;
  startMs: number | undefined;
}

function timeoutsOf(values: RunValues): Timeouts {
  const waitMs = durationFlag("timeout", values.timeout) ?? durationFlag("timeout-ms", values["timeout-ms"]);
  return {
    waitMs,
    turnMs: durationFlag("turn-timeout", values["turn-timeout"]),
    startMs: durationFlag("start-timeout", values["start-timeout"]),
  };
}

/** The prompt: --prompt-file, else the words after the options, else stdin when it is not a terminal. */
async function readPrompt(args: RunArgs): Promise<string> {
  const file = args.values["prompt-file"];
  if (file === undefined) {
    const prompt = args.positionals.join(" ");
    return prompt.length === 0 && !process.stdin.isTTY ? readStdin() : prompt;
  }
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    throw new RunUsageError(
      `--prompt-file ${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? "error"}); check the path`,
    );
  }
}

/** Repeated `--flag key=value` pairs as an object; a malformed one is a usage error naming the flag. */
function keyValues(flag: string, pairs: readonly string[]): Record<string, string> | undefined {
  const values: Record<string, string> = {};
  for (const kv of pairs) {
    const eq = kv.indexOf("=");
    if (eq <= 0) throw new RunUsageError(`--${flag} takes key=value, got '${kv}'`);
    values[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  return Object.keys(values).length > 0 ? values : undefined;
}

function maxTurnsOf(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const turns = Number(text);
  if (!Number.isInteger(turns) || turns < 1)
    throw new RunUsageError(`--max-turns takes a positive whole number, got '${text}'`);
  return turns;
}

const LIMIT_NAMES = ["pids", "memoryMb", "cpus", "scratchMb"] as const;

/** `--limit name=N …` as the job's `options.limits` (the schema checks the numbers). */
function limitsOf(flags: readonly string[]): Partial<Record<(typeof LIMIT_NAMES)[number], number>> | undefined {
  if (flags.length === 0) return undefined;
  const limits: Partial<Record<(typeof LIMIT_NAMES)[number], number>> = {};
  for (const flag of flags) {
    const [name, value] = flag.split("=", 2);
    const known = LIMIT_NAMES.find((n) => n === name);
    if (known === undefined || value === undefined || value === "" || !Number.isFinite(Number(value))) {
      throw new RunUsageError(`--limit takes name=N with name one of ${LIMIT_NAMES.join(", ")}, got '${flag}'`);
    }
    limits[known] = Number(value);
  }
  return limits;
}

function enqueueInput(values: RunValues, prompt: string, timeouts: Timeouts): EnqueueInput {
  return {
    prompt,
    cwd: resolve(values.cwd ?? process.cwd()),
    session: values.session,
    idempotencyKey: values["idempotency-key"],
    variables: keyValues("var", values.var ?? []),
    labels: keyValues("label", values.label ?? []),
    tenant: values.tenant,
    options: {
      model: values.model,
      supervised: values.supervised,
      maxTurns: maxTurnsOf(values["max-turns"]),
      allowedTools: values["allowed-tools"]?.split(",").filter(Boolean),
      timeoutMs: timeouts.turnMs,
      limits: limitsOf(values.limit ?? []),
    },
  };
}

/** The outcome of an error that ended the command before the turn did. */
function outcomeOfError(err: unknown): Outcome {
  if (err instanceof RunUsageError || err instanceof BadDurationError) return "usage";
  if (err instanceof InvalidTurnError || err instanceof MissingVariableError) return "usage";
  if (err instanceof WaitTimeoutError) return "timed_out";
  return "infrastructure";
}

/** Says how the command ended: one JSON object on stdout under --json, else `message` on stderr. */
function report(
  json: boolean | undefined,
  scrub: Scrub,
  outcome: Outcome,
  fields: Record<string, unknown>,
  message?: string,
): number {
  return reportAs(json, scrub, { outcome, exitCode: exitCodeOf(outcome) }, fields, message);
}

/** As report, for an ending that is not a turn's outcome (an interrupt) and so carries its own code. */
function reportAs(
  json: boolean | undefined,
  scrub: Scrub,
  verdict: { outcome: string; exitCode: number },
  fields: Record<string, unknown>,
  message?: string,
): number {
  if (json) process.stdout.write(scrub(JSON.stringify({ ...fields, ...verdict })) + "\n");
  else if (message !== undefined) process.stderr.write(scrub(`turnstream run: ${message}\n`));
  return verdict.exitCode;
}

/** The command that cancels the turn, with the queue flags this run was given. */
function cancelCommand(turn: string, values: RunValues): string {
  const flags = (["prefix", "queue-prefix", "queue"] as const).flatMap((flag) =>
    values[flag] === undefined ? [] : [`--${flag}`, values[flag]],
  );
  return ["turnstream cancel", turn, ...flags].join(" ");
}

/** Events that show a worker took the turn (or that it ended before one had to). */
const TAKEN_KINDS: ReadonlySet<string> = new Set(["attempt.started", "turn.finished", "turn.failed", "turn.cancelled"]);

/** Watches for a worker to take the turn; aborts the wait when none has within --start-timeout. */
class StartWatch {
  readonly #controller = new AbortController();
  readonly #timer: NodeJS.Timeout | undefined;
  #taken = false;

  constructor(startMs: number | undefined) {
    if (startMs === undefined) return;
    this.#timer = setTimeout(() => {
      if (!this.#taken)
        this.#controller.abort(
          new NoWorkerInTimeError(
            `no worker took the turn within ${startMs} ms; check that workers run on this queue (turnstream status), then retry`,
          ),
        );
    }, startMs);
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  readonly onEvent = (event: Envelope): void => {
    if (!TAKEN_KINDS.has(event.kind)) return;
    this.#taken = true;
    clearTimeout(this.#timer);
  };

  stop(): void {
    clearTimeout(this.#timer);
  }
}

/**
 * Says on stderr each time the turn parks (what it waits on, the deadline, the decide command); with
 * --exit-on-park it also aborts the wait, so the command exits at once.
 */
function parkWatch(
  queued: EnqueueResult,
  exitOnPark: boolean,
  scrub: Scrub,
): { watch: ParkWatch; signal: AbortSignal } {
  const controller = new AbortController();
  const watch = new ParkWatch(queued.session, queued.turn, (parked) => {
    process.stderr.write(scrub(parkedNotice("turnstream run", parked, !exitOnPark)));
    if (exitOnPark) controller.abort(new TurnParkedStop(parked));
  });
  return { watch, signal: controller.signal };
}

/** What --json says of a turn left parked: the request, its deadline and the command that decides it. */
function reportParked(parked: ParkedView, values: RunValues, scrub: Scrub): number {
  const fields = {
    session: parked.session,
    turn: parked.turn,
    status: "parked",
    requestId: parked.requestId,
    tool: parked.tool,
    shown: parked.shown,
    deadline: parked.deadline,
    decideCommand: parked.decideCommand,
  };
  // The notice on stderr said it all; the text mode adds nothing.
  return report(values.json, scrub, "parked", fields);
}

/** A warning on stderr when no worker listens on the queue: the turn would wait until one starts. */
async function warnWithoutWorker(producer: Producer): Promise<void> {
  if ((await liveWorkerCount(producer.queue)) !== 0) return;
  process.stderr.write(`turnstream run: warning: ${noWorkerWarning(producer.queue.name)}\n`);
}

/** One line with what the turn took: attempts, tool calls, time, cost and tokens. */
function figuresLine(ended: TurnReport<string>): string {
  const { attempts, toolCalls, seconds, costUsd, tokens } = ended;
  return `turn ${ended.turn} ${ended.status}: attempt ${attempts}, ${toolCalls} tool call(s), ${secondsText(seconds)}, $${costUsd.toFixed(4)}, ${tokens.input} tokens in, ${tokens.output} out\n`;
}

function reportResult(result: TurnResult, progress: TurnProgress, values: RunValues, scrub: Scrub): number {
  const ended = turnReport(result, progress.figures(), endingOf(result), scrub);
  if (!values.json) {
    // The model's text: escaped for the terminal, lines kept.
    if (result.resultText !== undefined)
      process.stdout.write(
        forTerminal(scrub(`result (${result.status}): ${result.resultText}\n`), { multiline: true }),
      );
    process.stdout.write(figuresLine(ended));
  }
  // `attempt`, `error` and `cliSessionId` as this command always printed them, beside the shared report.
  const fields = { ...ended, attempt: result.attempt, error: result.error, cliSessionId: result.cliSessionId };
  const why = ended.message === undefined ? "" : ` (${ended.message})`;
  const said =
    result.status === "finished"
      ? undefined
      : `turn ${result.turn} ${result.status}${result.errorKind ? ` (${result.errorKind})` : ""}: ${ended.outcome}${why}`;
  return report(values.json, scrub, ended.outcome, fields, said);
}

/** How long --cancel-on-interrupt waits for the cancel: a stopping CI job gets little time. */
const CANCEL_ON_INTERRUPT_MS = 5000;

/** --cancel-on-interrupt: the turn cancelled (or its worker told to end it); `failed` when Redis did not say. */
async function cancelOnInterrupt(
  producer: Producer,
  queued: EnqueueResult,
  signal: StopSignal,
): Promise<CancelResult["outcome"] | "failed"> {
  const cancelling = producer.cancelTurn(queued.turn, {
    session: queued.session,
    reason: `the command following it was stopped (${signal}) with --cancel-on-interrupt`,
    by: "turnstream run",
  });
  const cancelled = await withTimeout(cancelling, CANCEL_ON_INTERRUPT_MS, "no answer").catch(() => undefined);
  return cancelled?.outcome ?? "failed";
}

const AFTER_CANCEL: Readonly<Record<CancelResult["outcome"] | "failed", string>> = {
  cancelled: "--cancel-on-interrupt cancelled it: it will not run",
  requested: "--cancel-on-interrupt asked its worker to end it, which it does now",
  too_late: "it had ended already; nothing to cancel",
  failed: "cancelling it failed (Redis did not answer in time); it may go on running",
};

/** A signal stopped the command while it followed the turn: what happened, how to cancel it, exit 128 + N. */
async function reportInterrupted(
  signal: StopSignal,
  producer: Producer,
  queued: EnqueueResult,
  progress: TurnProgress,
  values: RunValues,
  scrub: Scrub,
): Promise<number> {
  const cancel = values["cancel-on-interrupt"] === true ? await cancelOnInterrupt(producer, queued, signal) : undefined;
  const stillRuns = cancel === undefined || cancel === "failed";
  const how = cancelCommand(queued.turn, values);
  const next =
    cancel === undefined
      ? `it goes on running (${how} stops it)`
      : `${AFTER_CANCEL[cancel]}${stillRuns ? ` (${how})` : ""}`;
  const message = `interrupted by ${signal} while following turn ${queued.turn}; ${next}`;
  const ending = {
    status: "unended" as const,
    outcome: "interrupted",
    attempts: progress.attempt,
    errorKind: undefined,
    message,
    resultText: undefined,
  };
  const fields = {
    ...turnReport(queued, progress.figures(), ending, scrub),
    signal,
    cancel,
    cancelCommand: stillRuns ? how : undefined,
  };
  return reportAs(values.json, scrub, { outcome: "interrupted", exitCode: EXIT_ON_SIGNAL[signal] }, fields, message);
}

/** The turn did not end while we waited: the wait timed out, no worker took it, or Redis went away. */
async function reportUnended(
  err: unknown,
  producer: Producer,
  queued: EnqueueResult,
  values: RunValues,
  scrub: Scrub,
): Promise<number> {
  const where = { session: queued.session, turn: queued.turn };
  if (err instanceof NoWorkerInTimeError) {
    // The pipeline retries the job: a turn left queued would run later as a stray duplicate.
    await producer
      .cancelTurn(queued.turn, { session: queued.session, reason: "no worker took it in time", by: "turnstream run" })
      .catch(() => undefined);
    return report(
      values.json,
      scrub,
      "infrastructure",
      { ...where, error: err.message },
      `${err.message} (the turn was cancelled)`,
    );
  }
  const message =
    err instanceof WaitTimeoutError
      ? `turn ${queued.turn} did not end within --timeout (${values.timeout ?? `${values["timeout-ms"]} ms`}); it goes on running (${cancelCommand(queued.turn, values)} stops it)`
      : explainRedisError(err, redisUrlForDisplay(), `waiting for turn ${queued.turn}`).message;
  return report(values.json, scrub, outcomeOfError(err), { ...where, error: message }, message);
}

async function followToEnd(
  producer: Producer,
  queued: EnqueueResult,
  values: RunValues,
  timeouts: Timeouts,
  scrub: Scrub,
  interrupt: AbortSignal,
): Promise<number> {
  if (!values.json) process.stdout.write(`turn ${queued.turn} in session ${queued.session}\n`);
  await warnWithoutWorker(producer);
  const watch = new StartWatch(timeouts.startMs);
  const parks = parkWatch(queued, values["exit-on-park"] === true, scrub);
  const signal = AbortSignal.any([watch.signal, parks.signal, interrupt]);
  const progress = new TurnProgress(queued.turn);
  try {
    // Stopped already (a signal while the turn was enqueued): a wait on an aborted signal never ends.
    signal.throwIfAborted();
    const out = values.json ? process.stderr : process.stdout;
    const result = await followTurn(producer, queued.session, queued.turn, {
      out,
      scrub,
      progress,
      timeoutMs: timeouts.waitMs,
      signal,
      onEvent: (event) => {
        watch.onEvent(event);
        parks.watch.onEvent(event);
      },
    });
    return reportResult(result, progress, values, scrub);
  } catch (err) {
    const reason = signal.aborted ? signal.reason : err;
    if (reason instanceof TurnParkedStop) return reportParked(reason.parked, values, scrub);
    if (reason instanceof Interrupted)
      return reportInterrupted(reason.signal, producer, queued, progress, values, scrub);
    return reportUnended(reason, producer, queued, values, scrub);
  } finally {
    watch.stop();
  }
}

function printQueued(queued: EnqueueResult, json: boolean | undefined): void {
  const again = queued.created ? "" : " (already queued with that idempotency key)";
  process.stdout.write(
    json ? `${JSON.stringify(queued)}\n` : `queued turn ${queued.turn} in session ${queued.session}${again}\n`,
  );
}

async function enqueueAndFollow(args: RunArgs, scrub: Scrub): Promise<number> {
  const values = args.values;
  if (values["exit-on-park"] === true && values.wait !== true)
    throw new RunUsageError("--exit-on-park only applies with --wait");
  if (values["cancel-on-interrupt"] === true && values.wait !== true)
    throw new RunUsageError("--cancel-on-interrupt only applies with --wait");
  const timeouts = timeoutsOf(values);
  const input = enqueueInput(values, await readPrompt(args), timeouts);
  const redis = await connectForCommand();
  const producer = await producerWithArchive(
    { redis, ...queueConfigOf(values), checkCwd: values["check-cwd"] },
    values.archive,
  );
  // Held from before the enqueue: a signal in between still finds the turn to say (or cancel).
  const interrupt = values.wait ? interruptSignal() : undefined;
  try {
    const queued = await producer.enqueueTurn(input);
    if (interrupt !== undefined) return await followToEnd(producer, queued, values, timeouts, scrub, interrupt.signal);
    printQueued(queued, values.json);
    return EXIT.finished;
  } finally {
    interrupt?.release();
    await producer.close();
    redis.disconnect();
  }
}

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("run", usage, { args: argv, allowPositionals: true, options });
  if (typeof args === "number") {
    // The usage went to stderr; a pipeline reading --json stdout still gets its one object.
    const flags = argv.includes("--") ? argv.slice(0, argv.indexOf("--")) : argv;
    if (args === EXIT.usage && flags.includes("--json"))
      report(true, (s) => s, "usage", { error: "the command line is not valid; the usage is on stderr" });
    return args;
  }
  const scrub = defaultScrub();
  try {
    return await enqueueAndFollow(args, scrub);
  } catch (err) {
    const message = explainRedisError(err, redisUrlForDisplay(), "enqueueing the turn").message;
    return report(args.values.json, scrub, outcomeOfError(err), { error: message }, message);
  }
}
