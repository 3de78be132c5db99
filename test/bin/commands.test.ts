// The product's own commands end to end: `demo` (the README's main job), `run --wait` against a worker
// process, `status`, scrubbed `tail` output, and `replay --export-traces` into a real OTLP receiver.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { createEventLog } from "../../src/log/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { startOtlpReceiver } from "../telemetry/otlp-receiver.ts";
import { cleanupKeys, cliEnv, NODE, readAll, redisFor, startWorkerProcess, testSpace } from "../worker/_support.ts";

const exec = promisify(execFile);
const BIN = join(process.cwd(), "src", "bin", "turnstream.ts");

async function turnstream(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const succeeded = await exec(NODE, [BIN, ...args], {
      env: { ...process.env, NO_COLOR: "1", ...env },
      timeout: 120_000,
    });
    return { code: 0, stdout: succeeded.stdout, stderr: succeeded.stderr };
  } catch (err) {
    const failure = err as { code?: number; stdout?: string; stderr?: string };
    return {
      code: typeof failure.code === "number" ? failure.code : -1,
      stdout: failure.stdout ?? "",
      stderr: failure.stderr ?? "",
    };
  }
}

test("demo: two turns of one session offline, the second resumes the first; its replay command finds them", async () => {
  const space = testSpace();
  const redis = redisFor();
  // The prefix as most set it, in the environment: the library's producer and worker read it too.
  const env: Record<string, string> = { ANTHROPIC_API_KEY: "", TURNSTREAM_PREFIX: space.logPrefix };
  try {
    const demoRun = await turnstream(["demo"], env);
    assert.equal(demoRun.code, 0, demoRun.stderr + demoRun.stdout);
    assert.match(demoRun.stdout, /scripted model server .* \(offline\)/);
    assert.match(demoRun.stdout, /Tool Called: Bash\(/);
    assert.match(demoRun.stdout, /Tool Called: Write\(/);
    assert.match(demoRun.stdout, /Tool Result: 1\t# Notes/, "turn 2 read back the file turn 1 wrote");
    assert.match(demoRun.stdout, /turn 2 resumed turn 1/);
    const history = Number(/the model saw (\d+) messages of history/.exec(demoRun.stdout)?.[1]);
    assert.ok(history >= 6, `turn 2's request carried turn 1's conversation (${history} messages)`);
    await assertReplayHintWorks(demoRun.stdout, space.logPrefix);
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

/** The demo's `replay it:` line names its prefix, and that command, run in a clean environment, replays the session. */
async function assertReplayHintWorks(stdout: string, prefix: string): Promise<void> {
  const hint = /^replay it: npm run turnstream -- (replay \S+ --prefix \S+)$/m.exec(stdout);
  assert.ok(hint, stdout);
  const args = hint[1]!.split(" ");
  assert.equal(args.at(-1), prefix);
  const replayed = await turnstream(args, { TURNSTREAM_PREFIX: "" });
  assert.equal(replayed.code, 0, replayed.stderr);
  assert.match(replayed.stdout, /the session remembered turn one/);
}

test("demo --prefix: the session is under that prefix and the replay command it prints says so", async () => {
  const space = testSpace();
  const redis = redisFor();
  try {
    const demoRun = await turnstream(["demo", "--prefix", space.logPrefix], { ANTHROPIC_API_KEY: "" });
    assert.equal(demoRun.code, 0, demoRun.stderr + demoRun.stdout);
    const session = /^session (\S+), workspace/m.exec(demoRun.stdout)?.[1];
    assert.ok(session, demoRun.stdout);
    const events = await readAll(createEventLog({ redis, prefix: space.logPrefix }), session);
    assert.equal(events.filter((e) => e.kind === "turn.finished").length, 2);
    await assertReplayHintWorks(demoRun.stdout, space.logPrefix);
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

test("demo: no Redis → says how to start one, exit 3", async () => {
  const noRedis = await turnstream(["demo"], { REDIS_URL: "redis://127.0.0.1:1" });
  assert.equal(noRedis.code, 3);
  assert.match(noRedis.stderr, /cannot reach Redis at redis:\/\/127\.0\.0\.1:1.*redis-server/);
});

test("run --wait follows a turn on a worker process; status sees the worker; a bad payload is refused", async () => {
  const space = testSpace();
  const server = await startModelServer({
    script: {
      responses: [
        { content: [{ type: "tool_use", name: "Bash", input: { command: "echo run-marker", description: "echo" } }] },
        { content: [{ type: "text", text: "all done" }] },
      ],
    },
  });
  const ws = space.workspace();
  const common = { TURNSTREAM_PREFIX: space.logPrefix, TURNSTREAM_QUEUE_PREFIX: space.queuePrefix };
  const worker = await startWorkerProcess({
    ...cliEnv(server.url),
    ...common,
    TURNSTREAM_WORKSPACE_ROOTS: ws,
    TURNSTREAM_INSTANCE_ROOT: space.dir("root"),
  });
  const redis = redisFor();
  try {
    const status = await turnstream(["status"], common);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /workers: 1/);

    const waited = await turnstream(
      ["run", "--wait", "--cwd", ws, "--allowed-tools", "Bash", "--", "say", "hi"],
      common,
    );
    assert.equal(waited.code, 0, waited.stderr + waited.stdout);
    assert.match(waited.stdout, /Tool Called: Bash\(\{"command":"echo run-marker"/);
    assert.match(waited.stdout, /Tool Result: run-marker/);
    assert.match(waited.stdout, /finished, attempt 1, 1 tool call\(s\)/);
    assert.match(waited.stdout, /result \(finished\): all done/);
    const session = /in session (\S+)/.exec(waited.stdout)?.[1];
    assert.ok(session);
    const log = createEventLog({ redis, prefix: space.logPrefix });
    const kinds = (await readAll(log, session)).map((e) => e.kind);
    assert.ok(kinds.includes("turn.queued") && kinds.includes("turn.finished"), kinds.join(","));

    assert.ok(!waited.stderr.includes("no live worker"), "no warning while a worker listens");

    const outside = await turnstream(["run", "--wait", "--cwd", "/", "--", "hello"], common);
    assert.equal(outside.code, 2, "a cwd outside the worker's roots is a usage error: fix the call, do not retry");
    assert.match(outside.stdout + outside.stderr, /failed/);
    const outsideJson = await turnstream(["run", "--wait", "--json", "--cwd", "/", "--", "hello"], common);
    assert.equal(outsideJson.code, 2);
    const said = JSON.parse(outsideJson.stdout) as {
      status: string;
      errorKind: string;
      outcome: string;
      exitCode: number;
    };
    assert.deepEqual(
      [said.status, said.errorKind, said.outcome, said.exitCode],
      ["failed", "workspace_not_allowed", "usage", 2],
    );

    const bad = await turnstream(["run", "--cwd", ws, "--var", "x=1", "--", "hello {{missing.name}}"], common);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /missing\.name/);
  } finally {
    worker.kill("SIGTERM");
    await worker.exited;
    await cleanupKeys(redis, space);
    redis.disconnect();
    await server.close();
    space.cleanup();
  }
});

test("tail output is scrubbed of the environment's secrets; replay --export-traces sends the session's spans", async () => {
  const space = testSpace();
  const redis = redisFor();
  const receiver = await startOtlpReceiver();
  const secret = "canary-7d1f0c2b9e4a";
  try {
    const log = createEventLog({ redis, prefix: space.logPrefix });
    const session = `s-${space.id}`;
    const { epoch, attempt } = await log.beginAttempt(session, "t_commandstest1");
    const line = (cliMessage: object): { turn: string; attempt: number; kind: string; data: unknown } => ({
      turn: "t_commandstest1",
      attempt,
      kind: "cli.line",
      data: { raw: JSON.stringify(cliMessage) },
    });
    const appended = await log.append(session, epoch, [
      { turn: "t_commandstest1", attempt, kind: "attempt.started", data: {} },
      line({ type: "system", subtype: "init", session_id: "c1", model: "m", tools: [] }),
      line({
        type: "assistant",
        message: { id: "m1", role: "assistant", content: [{ type: "text", text: `the token is ${secret}` }] },
        session_id: "c1",
      }),
      line({ type: "result", subtype: "success", is_error: false, result: "ok", session_id: "c1", usage: {} }),
      { turn: "t_commandstest1", attempt, kind: "turn.finished", data: { attempt } },
    ]);
    assert.equal(appended.outcome, "appended");

    const tail = await turnstream(["tail", session], { TURNSTREAM_PREFIX: space.logPrefix, DEPLOY_TOKEN: secret });
    assert.equal(tail.code, 0, tail.stderr);
    assert.ok(tail.stdout.includes("[REDACTED:DEPLOY_TOKEN]"), tail.stdout);
    assert.ok(!tail.stdout.includes(secret));

    const noExporter = await turnstream(["replay", session, "--export-traces"], { TURNSTREAM_PREFIX: space.logPrefix });
    assert.equal(noExporter.code, 2);
    assert.match(noExporter.stderr, /OTEL_EXPORTER_OTLP_ENDPOINT/);

    const exportRun = await turnstream(["replay", session, "--export-traces"], {
      TURNSTREAM_PREFIX: space.logPrefix,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    });
    assert.equal(exportRun.code, 0, exportRun.stderr);
    assert.match(exportRun.stdout, /exported \d+ spans of 1 attempt/);
    await receiver.waitFor((q) => q.bodyText.includes("invoke_agent claude-code"), 10_000);
    assert.ok(receiver.jsonSpanNames().includes("invoke_agent claude-code"));
  } finally {
    await receiver.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

test("cancel: a queued turn with no worker is cancelled and recorded; an ended one is said to have ended (exit 0); an unknown turn is a usage error", async () => {
  const space = testSpace();
  const redis = redisFor();
  const common = { TURNSTREAM_PREFIX: space.logPrefix, TURNSTREAM_QUEUE_PREFIX: space.queuePrefix };
  try {
    const queued = await turnstream(["run", "--json", "--cwd", space.workspace(), "--", "never runs"], common);
    assert.equal(queued.code, 0, queued.stderr);
    const { turn, session } = JSON.parse(queued.stdout) as { turn: string; session: string };
    const cancelRun = await turnstream(["cancel", turn], common);
    assert.equal(cancelRun.code, 0, cancelRun.stderr);
    assert.match(cancelRun.stdout, /cancelled: it will not run/);
    const log = createEventLog({ redis, prefix: space.logPrefix });
    const kinds = (await readAll(log, session)).map((e) => e.kind);
    assert.deepEqual(kinds, ["turn.queued", "turn.cancelled"]);
    const again = await turnstream(["cancel", turn], common);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /it had ended already/);
    // The same through flags instead of the environment, and as JSON.
    const flags = ["--prefix", space.logPrefix, "--queue-prefix", space.queuePrefix];
    const json = await turnstream(["cancel", turn, "--json", ...flags]);
    assert.equal(json.code, 0, json.stderr);
    assert.deepEqual(JSON.parse(json.stdout), { session, turn, outcome: "too_late" });
    const status = await turnstream(["status", "--json", ...flags]);
    assert.equal(status.code, 0, status.stderr);
    assert.deepEqual((JSON.parse(status.stdout) as { workers: string[] }).workers, []);
    const unknown = await turnstream(["cancel", "t_doesnotexist000"], common);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /not known to the queue; check the id, or pass --session/);
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});
