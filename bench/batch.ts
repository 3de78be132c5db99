// `turnstream batch` with many turns over five sessions, on one worker (five at a time) running the
// real CLI against the scripted model server: every turn finishes, once, and a session's turns run
// in file order. The suite runs a few turns of the same (test/bin/batch.test.ts).
// `npm run bench -- batch [turns]`. Ratio = attempts / turns (1 when each turn ran once).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { turnstream } from "../test/bin/_cli.ts";
import { rig } from "../test/worker/_more.ts";

const TURNS = Number(process.argv[2] ?? 20);
const SESSIONS = 5;

interface BatchJson {
  outcome: string;
  turns: Array<{ status: string; turn: string; attempts: number }>;
}

const stage = await rig({ responses: [] });
stage.worker({ concurrency: SESSIONS });
const sessions = Array.from({ length: SESSIONS }, (_, i) => `s-bench-batch-${i}`);
const file = join(stage.space.root, "batch.jsonl");
const lines = Array.from({ length: TURNS }, (_, line) =>
  JSON.stringify({
    session: sessions[line % SESSIONS],
    prompt: `turn ${line} of the batch`,
    cwd: stage.ws,
    label: `turn ${line}`,
  }),
);
writeFileSync(file, lines.join("\n") + "\n");

const started = performance.now();
const args = ["batch", file, "--json", "--prefix", stage.space.logPrefix, "--queue-prefix", stage.space.queuePrefix];
const run = await turnstream(args, {}, 60 * 60_000);
const totalMs = performance.now() - started;

const problems: string[] = [];
let attempts = 0;
try {
  const said = JSON.parse(run.stdout.trim()) as BatchJson;
  if (run.code !== 0 || said.outcome !== "finished") problems.push(`exit ${run.code}, outcome ${said.outcome}`);
  for (const turn of said.turns) if (turn.status !== "finished") problems.push(`turn ${turn.turn} ${turn.status}`);
  for (const [index, session] of sessions.entries()) {
    const events = await stage.events(session);
    const attemptsStarted = events.filter((e) => e.kind === "attempt.started");
    attempts += attemptsStarted.length;
    const inFile = said.turns.filter((_, line) => line % SESSIONS === index).map((t) => t.turn);
    const ran = attemptsStarted.map((e) => e.turn);
    if (JSON.stringify(ran) !== JSON.stringify(inFile)) problems.push(`${session}: turns out of file order or rerun`);
  }
} catch (err) {
  problems.push(`no JSON report (exit ${run.code}): ${(err as Error).message}; ${run.stderr.slice(-500)}`);
} finally {
  await stage.dispose();
}

for (const problem of problems.slice(0, 10)) process.stdout.write(`problem: ${problem}\n`);
const perTurnMs = totalMs / TURNS;
process.stdout.write(
  `${TURNS} turns, ${SESSIONS} sessions: ${totalMs.toFixed(0)} ms (${perTurnMs.toFixed(0)} ms a turn), ` +
    `${attempts} attempts, ${problems.length} problems\n`,
);
process.stdout.write(
  JSON.stringify({
    bench: "batch",
    ratio: Number((attempts / TURNS).toFixed(4)),
    turns: TURNS,
    sessions: SESSIONS,
    totalMs: Math.round(totalMs),
    perTurnMs: Math.round(perTurnMs),
    problems: problems.length,
  }) + "\n",
);
process.exit(problems.length === 0 ? 0 : 1);
