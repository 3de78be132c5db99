// Load: 1,000 turns over 10 sessions on 4 worker processes (concurrency 2 each); turns/s, and checks
// from the log that every turn finished once, in enqueue order per session, never overlapping.
// Uses a fast fake CLI (a shell script printing init/assistant/result and keeping a session file the
// way the real CLI does): the real one costs ~0.7 s and ~210 MB per run, which on 2 shared cores would
// make 1,000 turns take many minutes and measure the CLI rather than the queue. Not in the default suite.
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createProducer } from "../src/queue/index.ts";
import {
  cleanupKeys,
  readAll,
  redisFor,
  startWorkerProcess,
  testSpace,
  type WorkerProcess,
} from "../test/worker/_support.ts";

const TURNS = Number(process.argv[2] ?? 1000);
const SESSIONS = 10;
const WORKERS = 4;
const space = testSpace();
const ws = space.workspace();
const fake = join(space.dir("bin"), "fake-claude");
writeFileSync(
  fake,
  `#!/bin/bash
sid=""
while [ $# -gt 0 ]; do [ "$1" = "--resume" ] && sid="$2"; shift; done
[ -z "$sid" ] && sid=$(cat /proc/sys/kernel/random/uuid)
prompt=$(cat)
dir="$CLAUDE_CONFIG_DIR/projects/$(printf %s "$PWD" | sed 's/[^A-Za-z0-9]/-/g')"
mkdir -p "$dir"
printf '{"type":"user","text":"%s"}\\n' "\${#prompt}" >> "$dir/$sid.jsonl"
echo '{"type":"system","subtype":"init","session_id":"'$sid'","cwd":"'$PWD'","tools":[],"model":"fake"}'
echo '{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"ok"}]},"session_id":"'$sid'"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","num_turns":1,"session_id":"'$sid'","total_cost_usd":0}'
`,
);
chmodSync(fake, 0o755);

const redis = redisFor();
const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
const workers: WorkerProcess[] = await Promise.all(
  Array.from({ length: WORKERS }, (_, index) =>
    startWorkerProcess({
      REDIS_URL: "redis://127.0.0.1:6379",
      ANTHROPIC_API_KEY: "sk-ant-load-dummy-000000",
      CLAUDE_BIN: fake,
      TURNSTREAM_WORKSPACE_ROOTS: ws,
      TURNSTREAM_PREFIX: space.logPrefix,
      TURNSTREAM_QUEUE_PREFIX: space.queuePrefix,
      TURNSTREAM_INSTANCE_ROOT: space.dir(`root-${index}`),
      TURNSTREAM_CONCURRENCY: "2",
      LOG_LEVEL: "info",
    }),
  ),
);
const sessions = Array.from({ length: SESSIONS }, (_, i) => `load-${i}-${space.id}`);
const expected = new Map<string, string[]>(sessions.map((s) => [s, []]));
const t0 = performance.now();
for (let turn = 0; turn < TURNS; turn++) {
  const session = sessions[turn % SESSIONS]!;
  const enqueued = await producer.enqueueTurn({ session: session, prompt: `turn ${turn}`, cwd: ws });
  expected.get(session)!.push(enqueued.turn);
}
const enqueueMs = performance.now() - t0;
// One follower per session (its last turn): turns of a session end in order, so that is all of them.
const results = await Promise.all(
  [...expected.values()].map((ts) => producer.waitForTurn(ts.at(-1)!, { timeoutMs: 900000 })),
);
const totalMs = performance.now() - t0;
let problems = 0;
const note = (message: string): void => {
  problems++;
  if (problems <= 10) process.stdout.write(`problem: ${message}\n`);
};
for (const result of results) if (result.status !== "finished") note(`turn ${result.turn} ${result.status}`);
let attempts = 0;
for (const session of sessions) {
  const events = await readAll(producer.log, session);
  const started = events.filter((e) => e.kind === "attempt.started");
  attempts += started.length;
  const order = started.map((e) => e.turn);
  if (JSON.stringify(order) !== JSON.stringify(expected.get(session)))
    note(`session ${session}: turns ran out of order or more than once`);
  let open: string | undefined;
  for (const event of events) {
    if (event.kind === "attempt.started") {
      if (open !== undefined) note(`session ${session}: ${event.turn} started while ${open} ran`);
      open = event.turn;
    } else if (event.kind === "turn.finished" || event.kind === "turn.failed") open = undefined;
  }
  if (events.filter((e) => e.kind === "turn.finished").length !== expected.get(session)!.length)
    note(`session ${session}: missing finished turns`);
}
for (const worker of workers) worker.kill("SIGTERM");
await Promise.all(workers.map((w) => w.exited));
await producer.close();
await cleanupKeys(redis, space);
redis.disconnect();
space.cleanup();
const tps = TURNS / (totalMs / 1000);
process.stdout.write(
  `${TURNS} turns, ${SESSIONS} sessions, ${WORKERS} workers × 2: ${totalMs.toFixed(0)} ms (enqueue ${enqueueMs.toFixed(0)} ms), ${tps.toFixed(1)} turns/s, ${attempts} attempts, ${problems} problems\n`,
);
process.stdout.write(
  JSON.stringify({
    bench: "load",
    ratio: Number((attempts / TURNS).toFixed(4)),
    turnsPerSecond: Number(tps.toFixed(2)),
    turns: TURNS,
    sessions: SESSIONS,
    workers: WORKERS,
    totalMs: Math.round(totalMs),
    problems,
    fakeCli: true,
  }) + "\n",
);
process.exit(problems === 0 ? 0 : 1);
