// `npm run bench -- parked`: parked supervised turns, with the real CLI and the scripted model server.
// One in-process worker at concurrency 2 parks N supervised turns (default 200): each turn's one Bash
// call waits out a short answer window and its turn parks. With all N parked it counts the CLI
// processes still alive (goal 0) and the Redis bytes the parked turns hold. Then, one turn at a time
// with the worker otherwise idle, it measures
//   resume: an operator's decision (the call to decide()) → the parked call's tool starting, on a
//           sample of the parked turns, cold (the worker keeps no session files in memory, so each
//           resume rebuilds the session file from Redis, as a worker that did not park the turn would);
//   fresh:  enqueueTurn → the first tool starting in an equivalent supervised turn whose call a signed
//           trust rule allows (the same hook, forwarder and hub; no operator).
// The two alternate, so load from elsewhere on the machine falls on both alike. Each side's time is
// split into stages read from the log, the job, the worker's log lines and the CLI's hook report.
// The tool records its own start: its Bash command is `date +%s%3N >> <file>` in the turn's own cwd.
// Options: --turns N (or PARKED_TURNS; default 200), --samples N (or PARKED_SAMPLES; default 20),
// --url redis://… (default: a private redis-server, so the memory figures are the bench's alone).
// Last line: {"bench":"parked","cliAlive","bytesPerParked","resumeRatio",…}; goals: cliAlive 0,
// resumeRatio (p50 resume / p50 fresh) ≤ 1.2.
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Job } from "bullmq";
import {
  decide,
  escapeGlob,
  generateOperatorKey,
  listPending,
  operatorKeyFromPem,
  parseOperatorKeys,
  RuleStore,
  ruleId,
  signRule,
} from "../src/decisions/index.ts";
import type { Logger } from "../src/kernel/index.ts";
import type { Envelope, RedisClient } from "../src/log/index.ts";
import { resolveClaudeBin } from "../src/runner/index.ts";
import { startTurnWorker } from "../src/worker/index.ts";
import { cliEnv, readAll, testStage } from "../test/worker/_support.ts";
import { benchRedis } from "./_redis.ts";
import { median, quantile } from "./_stats.ts";

const { values } = parseArgs({
  options: {
    turns: { type: "string", default: process.env["PARKED_TURNS"] ?? "200" },
    samples: { type: "string", default: process.env["PARKED_SAMPLES"] ?? "20" },
    url: { type: "string" },
  },
});
const wholeNumber = (flag: string, text: string): number => {
  const parsed = Number(text);
  if (!Number.isSafeInteger(parsed) || parsed < 1) throw new Error(`${flag} must be a whole number ≥ 1, got ${text}`);
  return parsed;
};
const TURNS = wholeNumber("--turns", values.turns);
const SAMPLES = Math.min(TURNS, wholeNumber("--samples", values.samples));
const CONCURRENCY = 2;
// Short, so parking 200 turns two at a time stays within minutes; the window is idle time in the CLI.
const ANSWER_WINDOW_MS = 200;
const PARK_COMMAND = "date +%s%3N >> started.txt";
const FRESH_COMMAND = "date +%s%3N >> fresh.txt";
const TURN_TIMEOUT_MS = 120_000;

const bashCall = (command: string) => ({ content: [{ type: "tool_use" as const, name: "Bash", input: { command } }] });
// Each turn's first model request takes one tool call; the request after its result gets the default "done".
const script = {
  responses: [
    ...Array.from({ length: TURNS }, () => ({ match: "PARK-GO", ...bashCall(PARK_COMMAND) })),
    ...Array.from({ length: SAMPLES }, () => ({ match: "FRESH-GO", ...bashCall(FRESH_COMMAND) })),
  ],
};

/** The worker's log lines with when they were written; warnings and errors also go to stderr. */
interface LogLine {
  level: string;
  at: number;
  msg: string;
  fields: Record<string, unknown>;
}
function capturingLogger(lines: LogLine[]): Logger {
  const at =
    (level: string) =>
    (obj: object | string, msg?: string): void => {
      const line =
        typeof obj === "string"
          ? { level, at: Date.now(), msg: obj, fields: {} }
          : { level, at: Date.now(), msg: msg ?? "", fields: obj as Record<string, unknown> };
      lines.push(line);
      if (level === "warn" || level === "error")
        process.stderr.write(`worker ${level}: ${line.msg} ${JSON.stringify(line.fields).slice(0, 400)}\n`);
    };
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface ProcessEntry {
  parent: number;
  name: string;
  /** The command line, NUL-separated as /proc has it. */
  cmdline: string;
}

/** Every process now: its parent, name and command line. */
function processTable(): Map<number, ProcessEntry> {
  const table = new Map<number, ProcessEntry>();
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
      const parent = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      table.set(Number(pid), { parent, name, cmdline: readFileSync(`/proc/${pid}/cmdline`, "utf8") });
    } catch {
      // ended meanwhile
    }
  }
  return table;
}

const cmdlineNow = (pid: number): string | undefined => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return undefined;
  }
};

/**
 * Live `claude` processes of this bench's worker: the CLI binary, with a settings file under its
 * instance root. A scan of /proc is not one instant, so a process counts only if it is still the same
 * CLI once the scan is over (all counted are alive then, together); and a CLI's child caught between
 * fork and exec has its parent's command line, so one whose parent is a counted CLI is not counted.
 */
function liveClis(claudeBin: string, instanceRoot: string): number {
  const isCli = (cmdline: string): boolean => {
    const argv = cmdline.split("\0");
    return argv[0] === claudeBin && argv.some((arg) => arg.startsWith(instanceRoot));
  };
  const clis = [...processTable()].filter(([, entry]) => isCli(entry.cmdline));
  const alive = clis.filter(([pid, entry]) => cmdlineNow(pid) === entry.cmdline);
  const pids = new Set(alive.map(([pid]) => pid));
  return alive.filter(([, entry]) => !pids.has(entry.parent)).length;
}

/**
 * Processes below this one (CLIs, their tools, hook forwarders, sandbox bridges) other than the
 * private redis-server and the worker's own watchdog shell (one per worker, not per turn).
 */
function descendants(): number {
  const table = processTable();
  const below = (pid: number): boolean => {
    for (let parent = table.get(pid)?.parent; parent !== undefined && parent > 1; parent = table.get(parent)?.parent)
      if (parent === process.pid) return true;
    return false;
  };
  const watchdog = (entry: ProcessEntry): boolean => entry.cmdline.split("\0").includes("turnstream-watchdog");
  return [...table].filter(([pid, entry]) => below(pid) && entry.name !== "redis-server" && !watchdog(entry)).length;
}

/** MEMORY USAGE of every key matching `pattern`, by key. */
async function memoryByKey(redis: RedisClient, pattern: string): Promise<Map<string, number>> {
  const sizes = new Map<string, number>();
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
    cursor = next;
    for (const key of keys) sizes.set(key, Number(await redis.call("MEMORY", "USAGE", key, "SAMPLES", "0")));
  } while (cursor !== "0");
  return sizes;
}

const usedMemory = async (redis: RedisClient): Promise<number> =>
  Number(/used_memory:(\d+)/.exec(await redis.info("memory"))?.[1]);

const sum = (numbers: Iterable<number>): number => [...numbers].reduce((total, value) => total + value, 0);

// --- set-up -------------------------------------------------------------------------------------

const store = await benchRedis(values.url);
// Whatever happens, what the bench started is taken down (the private redis-server above all), newest first.
const closers: (() => Promise<unknown>)[] = [() => store.close()];
try {
  const stage = await testStage(script, { redisUrl: store.url });
  closers.push(() => stage.close());
  const { space, redis, producer, ws, server } = stage;
  const claudeBin = resolveClaudeBin();
  const operator = generateOperatorKey();
  const operatorKey = operatorKeyFromPem(operator.privateKeyPem);
  // The fresh turns' call is allowed by a signed rule added before anything parks: a rule added later
  // would wake every parked turn (workers look again at parked turns when a rule is added). It matches
  // only the fresh command, so no parked call is decided by it.
  const rulePattern = `Bash(${escapeGlob(FRESH_COMMAND)})`;
  await new RuleStore(redis, space.logPrefix).put(
    signRule(operatorKey, {
      id: ruleId("allow", rulePattern),
      pattern: rulePattern,
      effect: "allow",
      by: "bench",
      at: new Date().toISOString(),
    }),
  );
  const workerLog: LogLine[] = [];
  const instanceRoot = space.dir("inst");
  const worker = startTurnWorker({
    redis,
    logPrefix: space.logPrefix,
    queuePrefix: space.queuePrefix,
    workspaceRoots: [ws],
    instanceRoot,
    concurrency: CONCURRENCY,
    operatorKeys: [operator.publicKey],
    parking: { answerWindowMs: ANSWER_WINDOW_MS },
    // Cold resumes: no session file kept in memory, each resume reads its snapshot from Redis.
    snapshotCacheBytes: 0,
    runEnv: cliEnv(server.url),
    logger: capturingLogger(workerLog),
  });
  closers.push(() => worker.close({ graceMs: 1000 }));
  await worker.ready();

  // --- park N turns -------------------------------------------------------------------------------

  interface ParkedTurn {
    session: string;
    turn: string;
    cwd: string;
  }
  const memoryBefore = await usedMemory(redis);
  const parkStart = Date.now();
  const turns: ParkedTurn[] = [];
  for (let index = 0; index < TURNS; index++) {
    const cwd = join(ws, `parked-${index}`);
    mkdirSync(cwd);
    const enqueued = await producer.enqueueTurn({ prompt: `PARK-GO ${index}`, cwd, options: { supervised: true } });
    turns.push({ session: enqueued.session, turn: enqueued.turn, cwd });
  }
  const parkedLines = (): number => workerLog.filter((line) => line.msg.startsWith("turn parked")).length;
  // A turn that ends instead of parking would leave the wait below hanging: its job's end says so at once.
  let jobsEnded = 0;
  worker.worker.on("completed", () => jobsEnded++);
  worker.worker.on("failed", () => jobsEnded++);
  // The most CLIs seen at once while turns were parking: the count that must drop to 0 once all are parked.
  let cliPeak = 0;
  let slotsPeak = 0;
  const parkDeadline = Date.now() + Math.max(300_000, TURNS * 15_000);
  while (parkedLines() < TURNS) {
    if (Date.now() > parkDeadline || jobsEnded > 0)
      throw new Error(
        `${parkedLines()} of ${TURNS} turns parked, ${jobsEnded} ended instead (see the worker's lines above)`,
      );
    cliPeak = Math.max(cliPeak, liveClis(claudeBin, instanceRoot));
    slotsPeak = Math.max(slotsPeak, worker.slots.busy);
    await sleep(250);
  }
  const parkSeconds = (Date.now() - parkStart) / 1000;
  // What one parking run takes: its attempt's start to its turn.parked, and its CLI's run (cli.exit).
  const parkRuns: number[] = [];
  const cliRuns: number[] = [];
  const logBytesByKind: Record<string, number> = {};
  for (const parked of turns) {
    const events = await readAll(producer.log, parked.session);
    const atOfKind = (kind: string): number => Date.parse(events.find((event) => event.kind === kind)!.at);
    parkRuns.push(atOfKind("turn.parked") - atOfKind("attempt.started"));
    cliRuns.push((events.find((event) => event.kind === "cli.exit")!.data as { durationMs: number }).durationMs);
    // What the session streams hold, by event kind: JSON bytes of the events' data per parked turn.
    for (const event of events)
      logBytesByKind[event.kind] = (logBytesByKind[event.kind] ?? 0) + JSON.stringify(event.data).length / TURNS;
  }
  for (const kind of Object.keys(logBytesByKind)) logBytesByKind[kind] = Math.round(logBytesByKind[kind]!);
  const parkRunMs = median(parkRuns);
  const cliRunMs = median(cliRuns);
  process.stdout.write(
    `parked ${TURNS} turns in ${parkSeconds.toFixed(1)} s (${(TURNS / parkSeconds).toFixed(2)} turns/s), up to ${cliPeak} CLIs and ${slotsPeak} busy slots at once while parking\n` +
      `  a parking run: ${parkRunMs} ms from attempt.started to turn.parked (p50), its CLI ${cliRunMs} ms\n`,
  );

  // --- what the parked turns hold -----------------------------------------------------------------

  const pendingByRequest = await listPending({ redis, prefix: space.logPrefix });
  const parkedRequests = pendingByRequest.filter((pending) => pending.status === "parked");
  if (parkedRequests.length !== TURNS)
    throw new Error(`${parkedRequests.length} parked requests in the pending index for ${TURNS} parked turns`);
  const requestOf = new Map(parkedRequests.map((pending) => [pending.session, pending.requestId]));
  const cliAlive = liveClis(claudeBin, instanceRoot);
  const slotsBusy = worker.slots.busy;
  const processesBelow = descendants();
  const jobCounts = await producer.queue.getJobCounts("active", "waiting", "delayed");
  const leasesHeld = (await memoryByKey(redis, `${space.logPrefix}{s:*}:lease`)).size;

  // Bytes: MEMORY USAGE (SAMPLES 0: every element counted) of every key under the bench's two prefixes,
  // taken before any sampled turn runs, so all of it is the parked turns'. It counts each turn's session
  // keys (the event stream: its run's CLI lines, the request, turn.parked; the snapshot blob: the CLI's
  // session file as base64 in JSON; the meta hash, the blob set, the queue's order keys), its BullMQ job
  // hash, and the keys the turns share: the pending index (one entry per parked request), the queue's
  // delayed set and event stream, the session index, the one trust rule.
  const sessionKeys = await memoryByKey(redis, `${space.logPrefix}{s:*`);
  const allKeys = new Map([
    ...(await memoryByKey(redis, `${space.logPrefix}*`)),
    ...(await memoryByKey(redis, `${space.queuePrefix}*`)),
  ]);
  const turnIds = new Set(turns.map((parked) => parked.turn));
  const jobBytes = sum([...allKeys].filter(([key]) => turnIds.has(key.split(":").at(-1)!)).map(([, bytes]) => bytes));
  const sessionBytes = sum(sessionKeys.values());
  const totalBytes = sum(allKeys.values());
  const bytesPerParked = Math.round(totalBytes / TURNS);
  const memoryDeltaPerParked =
    values.url === undefined ? Math.round(((await usedMemory(redis)) - memoryBefore) / TURNS) : undefined;
  process.stdout.write(
    `all parked: ${cliAlive} CLIs alive, ${processesBelow} processes below the bench, slots busy ${slotsBusy}/${worker.slots.size}, ${leasesHeld} leases, jobs ${JSON.stringify(jobCounts)}\n` +
      `Redis: ${bytesPerParked} B per parked turn (session keys ${Math.round(sessionBytes / TURNS)}, job ${Math.round(jobBytes / TURNS)}, ` +
      `shared ${Math.round((totalBytes - sessionBytes - jobBytes) / TURNS)})` +
      (memoryDeltaPerParked === undefined ? "\n" : `; used_memory grew ${memoryDeltaPerParked} B per parked turn\n`) +
      `  event data per parked turn by kind (B): ${JSON.stringify(logBytesByKind)}\n`,
  );

  // --- resume vs fresh ----------------------------------------------------------------------------

  /**
   * When each step of a sampled turn happened (ms since the epoch), in order; a stage is named by the
   * step it ends at and lasts from the step before it, so the stages add up to the whole.
   *   resume: start (decide() called), decided (decision.made appended), jobActive (BullMQ's processedOn),
   *           attemptStarted, cliSpawned (the worker's "spawning claude"), hookAsked and hookAnswered (the
   *           CLI's report of the PreToolUse hook: forwarder start-up and the hub's answer from the log),
   *           toolStarted (the Bash command's own clock);
   *   fresh:  start (enqueueTurn called), queued (turn.queued), jobActive, attemptStarted, cliSpawned,
   *           modelCalled (the model request's start), hubAsked (decision.requested, recorded as the hub
   *           got it), hubAnswered (decision.made of the rule), toolStarted.
   */
  type Marks = [step: string, at: number][];

  /** The PreToolUse hook of the call as the CLI reports it (a resumed CLI prints it): when it ran. */
  function hookOf(events: Envelope[]): { asked: number; answered: number } {
    for (const event of events) {
      if (event.kind !== "cli.line") continue;
      const line = JSON.parse((event.data as { raw: string }).raw) as {
        attachment?: { type?: string; durationMs?: number };
        timestamp?: string;
      };
      const hook = line.attachment;
      if (hook?.type !== "hook_success" || line.timestamp === undefined || hook.durationMs === undefined) continue;
      const answered = Date.parse(line.timestamp);
      return { asked: answered - hook.durationMs, answered };
    }
    throw new Error("the resumed CLI printed no hook report");
  }

  interface SampledTurn extends ParkedTurn {
    /** The file the turn's tool writes its start time to. */
    file: string;
  }

  /** Waits for a sampled turn to finish; its events of the last attempt, when its tool started, its job. */
  async function endOf(sampled: SampledTurn): Promise<{ events: Envelope[]; toolStarted: number; jobActive: number }> {
    const result = await producer.waitForTurn(sampled.turn, { timeoutMs: TURN_TIMEOUT_MS });
    if (result.status !== "finished") throw new Error(`turn ${sampled.turn} ended ${result.status}`);
    const path = join(sampled.cwd, sampled.file);
    const ran = existsSync(path) ? readFileSync(path, "utf8").trim().split("\n") : [];
    if (ran.length !== 1) throw new Error(`the tool of turn ${sampled.turn} ran ${ran.length} times`);
    const events = (await readAll(producer.log, sampled.session)).filter((event) => event.turn === sampled.turn);
    const attempt = events.findLast((event) => event.kind === "attempt.started")!.attempt;
    const job = await Job.fromId(producer.queue, sampled.turn);
    return {
      // The CLI lines and model calls of the run that reached the tool; other events whatever attempt wrote them.
      events: events.filter((event) => event.attempt === attempt || !["cli.line", "model.call"].includes(event.kind)),
      toolStarted: Number(ran[0]),
      jobActive: job!.processedOn!,
    };
  }

  const atOf = (events: Envelope[], kind: string): number => Date.parse(events.findLast((e) => e.kind === kind)!.at);
  const spawnedAt = (cwd: string): number =>
    workerLog.findLast((line) => line.msg === "spawning claude" && line.fields["cwd"] === cwd)!.at;

  const decideTarget = { log: producer.log, redis, operatorKey, trustedKeys: parseOperatorKeys([operator.publicKey]) };

  async function resumeOne(parked: ParkedTurn): Promise<Marks> {
    const requestId = requestOf.get(parked.session)!;
    const start = Date.now();
    await decide(decideTarget, { session: parked.session, requestId, decision: "allow", by: "bench" });
    const { events, toolStarted, jobActive } = await endOf({ ...parked, file: "started.txt" });
    const hook = hookOf(events.filter((event) => event.kind === "cli.line"));
    return [
      ["start", start],
      ["decided", atOf(events, "decision.made")],
      ["jobActive", jobActive],
      ["attemptStarted", atOf(events, "attempt.started")],
      ["cliSpawned", spawnedAt(parked.cwd)],
      ["hookAsked", hook.asked],
      ["hookAnswered", hook.answered],
      ["toolStarted", toolStarted],
    ];
  }

  const freshSessions: string[] = [];
  async function freshOne(index: number): Promise<Marks> {
    const cwd = join(ws, `fresh-${index}`);
    mkdirSync(cwd);
    const start = Date.now();
    const enqueued = await producer.enqueueTurn({ prompt: `FRESH-GO ${index}`, cwd, options: { supervised: true } });
    freshSessions.push(enqueued.session);
    const { events, toolStarted, jobActive } = await endOf({ ...enqueued, cwd, file: "fresh.txt" });
    const modelCall = events.find((event) => event.kind === "model.call")!.data as { startedAt: string };
    return [
      ["start", start],
      ["queued", atOf(events, "turn.queued")],
      ["jobActive", jobActive],
      ["attemptStarted", atOf(events, "attempt.started")],
      ["cliSpawned", spawnedAt(cwd)],
      ["modelCalled", Date.parse(modelCall.startedAt)],
      ["hubAsked", atOf(events, "decision.requested")],
      ["hubAnswered", atOf(events, "decision.made")],
      ["toolStarted", toolStarted],
    ];
  }

  const resumed: Marks[] = [];
  const fresh: Marks[] = [];
  for (let index = 0; index < SAMPLES; index++) {
    // Spread over the parked turns, from the first parked to the last.
    const parked = turns[Math.floor(((index + 0.5) * TURNS) / SAMPLES)]!;
    if (index % 2 === 0) {
      fresh.push(await freshOne(index));
      resumed.push(await resumeOne(parked));
    } else {
      resumed.push(await resumeOne(parked));
      fresh.push(await freshOne(index));
    }
  }

  // A finished turn's session keeps its keys too (its snapshot above all): the fresh turns' session keys,
  // to tell what parking adds over a turn that ran to its end.
  let finishedBytes = 0;
  for (const session of freshSessions)
    finishedBytes += sum((await memoryByKey(redis, `${space.logPrefix}{s:${session}}*`)).values());
  const finishedSessionBytes = Math.round(finishedBytes / freshSessions.length);

  // --- figures ------------------------------------------------------------------------------------

  /** Each stage's median over the samples (ms), by the step it ends at. */
  function stageMedians(samples: Marks[]): Record<string, number> {
    const steps = samples[0]!.map(([step]) => step);
    return Object.fromEntries(
      steps
        .slice(1)
        .map((step, index) => [step, median(samples.map((marks) => marks[index + 1]![1] - marks[index]![1]))]),
    );
  }

  const totalsOf = (samples: Marks[]): number[] => samples.map((marks) => marks.at(-1)![1] - marks[0]![1]);
  const resumeMs = totalsOf(resumed);
  const freshMs = totalsOf(fresh);
  const resumeStagesMs = stageMedians(resumed);
  const freshStagesMs = stageMedians(fresh);
  const stagesText = (stages: Record<string, number>): string =>
    Object.entries(stages)
      .map(([step, ms]) => `${step} ${ms}`)
      .join(", ");
  process.stdout.write(
    `resume (decision → tool start): p50 ${median(resumeMs)} ms, p95 ${quantile(resumeMs, 0.95)} ms over ${SAMPLES}\n` +
      `  stage medians (ms): ${stagesText(resumeStagesMs)}\n` +
      `fresh (enqueue → tool start):   p50 ${median(freshMs)} ms, p95 ${quantile(freshMs, 0.95)} ms over ${SAMPLES}\n` +
      `  stage medians (ms): ${stagesText(freshStagesMs)}\n` +
      `a finished fresh turn's session keys: ${finishedSessionBytes} B (a parked turn's: ${Math.round(sessionBytes / TURNS)} B)\n`,
  );

  const out = {
    bench: "parked",
    cliAlive,
    bytesPerParked,
    resumeRatio: Number((median(resumeMs) / median(freshMs)).toFixed(3)),
    goalCliAlive: 0,
    goalResumeRatio: 1.2,
    parkedTurns: TURNS,
    concurrency: CONCURRENCY,
    answerWindowMs: ANSWER_WINDOW_MS,
    parkSeconds: Number(parkSeconds.toFixed(1)),
    cliPeakWhileParking: cliPeak,
    slotsPeakWhileParking: slotsPeak,
    parkRunP50Ms: parkRunMs,
    parkCliP50Ms: cliRunMs,
    slotsBusy,
    processesBelow,
    leasesHeld,
    jobsActive: jobCounts["active"],
    jobsDelayed: jobCounts["delayed"],
    sessionBytesPerParked: Math.round(sessionBytes / TURNS),
    jobBytesPerParked: Math.round(jobBytes / TURNS),
    sharedBytesPerParked: Math.round((totalBytes - sessionBytes - jobBytes) / TURNS),
    memoryDeltaPerParked,
    finishedSessionBytes,
    logBytesByKind,
    samples: SAMPLES,
    workerWarnings: workerLog.filter((line) => line.level === "warn" || line.level === "error").length,
    resumeP50Ms: median(resumeMs),
    resumeP95Ms: quantile(resumeMs, 0.95),
    freshP50Ms: median(freshMs),
    freshP95Ms: quantile(freshMs, 0.95),
    resumeStagesMs,
    freshStagesMs,
  };
  process.stdout.write(JSON.stringify(out) + "\n");
} finally {
  for (const close of closers.reverse()) await close().catch(() => undefined);
}
