// A job's env overlay is an allow-list the worker's operator sets, and a run's env is built from a
// minimal base. Played as an attacker: each variable that once turned a job into code execution or a
// credential leak (the CLI binary, a Bun preload, the CLI's env file, a proxy, a CA file) is refused by
// name at enqueue and again by a worker given the job straight in Redis; a turn's Bash `env` shows no
// worker variable; an allowed name reaches the tool; an operator's pattern admits what it says only.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, writeFileSync, chmodSync } from "node:fs";
import { join } from "node:path";
import { baseEnv, cliSettingsEnv, modelAccessEnv, runTurn } from "../../src/runner/index.ts";
import { guardGit } from "../../src/runner/git-guard.ts";
import { createProducer, InvalidTurnError, JOB_VERSION } from "../../src/queue/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { hermeticEnv } from "../runner/_support.ts";
import { cliLines, rig, type Rig } from "./_more.ts";
import { cleanupKeys, cliEnv, processFleet, readAll, redisFor, testSpace } from "./_support.ts";

// Each once ran the attacker's code or sent the worker's credentials to the attacker.
const ATTACKS: Record<string, string> = {
  CLAUDE_BIN: "./evil-claude",
  BUN_OPTIONS: "--preload ./evil.js",
  CLAUDE_ENV_FILE: "./evil.sh",
  HTTPS_PROXY: "http://127.0.0.1:9",
  NODE_EXTRA_CA_CERTS: "./evil-ca.pem",
};

test("enqueue: each attack variable, and a name nobody listed, refused naming options.env.NAME and what to change", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const cwd = space.workspace();
  const refused = async (name: string, why: RegExp): Promise<void> => {
    const enqueued = producer.enqueueTurn({ prompt: "hi", cwd, options: { env: { [name]: ATTACKS[name] ?? "x" } } });
    await assert.rejects(enqueued, (err: unknown) => {
      assert.ok(err instanceof InvalidTurnError, String(err));
      assert.equal(err.field, `options.env.${name}`);
      assert.match(err.message, why);
      return true;
    });
  };
  try {
    const fromWorker = /may not be set by a job: .*the worker sets it from its own configuration/;
    for (const name of Object.keys(ATTACKS)) await refused(name, fromWorker);
    await refused("https_proxy", /through another server/);
    await refused("GREETING", /ask the worker operator to add it to TURNSTREAM_JOB_ENV_ALLOW/);
    await refused(
      "CLAUDE_CODE_MAX_RETRIES",
      /lists CLAUDE_CODE_MAX_RETRIES by its exact name in TURNSTREAM_JOB_ENV_ALLOW/,
    );
    // A reference's target name meets the same list.
    const references = [
      ["NODE_OPTIONS", /loads code/],
      ["GITHUB_TOKEN", /add it to TURNSTREAM_JOB_ENV_ALLOW/],
    ] as const;
    for (const [name, why] of references) {
      const env = { [name]: { fromEnv: "WORKER_VALUE" } };
      await assert.rejects(producer.enqueueTurn({ prompt: "hi", cwd, options: { env } }), why, name);
    }
    // The default lets CI metadata and the locale through.
    const env = { CI: "true", GITHUB_REPOSITORY: "acme/api", LANG: "C.UTF-8", LC_ALL: "C", TZ: "UTC" };
    await producer.enqueueTurn({ prompt: "hi", cwd, options: { env } });
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

test("an operator's pattern admits what it says and nothing else; nothing reaches a name that can never be set", async () => {
  const space = testSpace();
  const redis = redisFor();
  const jobEnvAllow = ["GITHUB_*", "DEPLOY_*", "CLAUDE_CODE_MAX_RETRIES"];
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix, jobEnvAllow });
  const cwd = space.workspace();
  const enqueue = (name: string) => producer.enqueueTurn({ prompt: "hi", cwd, options: { env: { [name]: "x" } } });
  try {
    for (const name of ["GITHUB_REPOSITORY", "GITHUB_RUN_ATTEMPT", "DEPLOY_TARGET", "CLAUDE_CODE_MAX_RETRIES"])
      await enqueue(name);
    // Outside the patterns, the default the list replaced included.
    for (const name of ["DEPLOY", "DEPLOYX", "deploy_target", "LANG", "CI"]) {
      await assert.rejects(enqueue(name), /add it to TURNSTREAM_JOB_ENV_ALLOW/, name);
    }
    // Inside GITHUB_*, but read by the CLI as runner paths or by tools as where a token goes.
    for (const name of ["GITHUB_ENV", "GITHUB_WORKSPACE", "GITHUB_API_URL"]) {
      await assert.rejects(enqueue(name), /may not be set by a job/, name);
    }
    assert.throws(
      () => createProducer({ redis, jobEnvAllow: ["BUN_OPTIONS"] }),
      /BUN_OPTIONS cannot be allowed: it loads code/,
    );
    assert.throws(() => createProducer({ redis, jobEnvAllow: ["HTTPS_PROXY"] }), /HTTPS_PROXY cannot be allowed/);
    assert.throws(() => createProducer({ redis, allowEnv: ["CLAUDE_*"] }), /CLAUDE_\* cannot be allowed/);
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

type Failures = Map<string, (err: Error) => void>;

/**
 * Adds a job straight to the queue, skipping the producer's checks; resolves with the worker's failure and its kind.
 */
async function directJob(
  stage: Rig,
  failures: Failures,
  env: Record<string, string>,
  jobNumber: number,
): Promise<{ message: string; kind: unknown }> {
  const session = `direct-${stage.space.id}-${jobNumber}`;
  const turn = `t_directenv${String(jobNumber).padStart(6, "0")}`;
  const failed = new Promise<Error>((resolve) => failures.set(turn, resolve));
  await stage.producer.order.register(session, turn);
  const enqueuedAt = new Date().toISOString();
  const job = {
    v: JOB_VERSION,
    session,
    turn,
    prompt: "hi",
    cwd: stage.ws,
    queuedSeq: 0,
    enqueuedAt,
    options: { env },
  };
  await stage.producer.queue.add("turn", job, { jobId: turn });
  const { message } = await failed;
  const end = (await stage.events(session)).find((e) => e.kind === "turn.failed");
  return { message, kind: (end?.data as { errorKind?: unknown } | undefined)?.errorKind };
}

test("a job written to Redis with an attack variable, or a name the worker does not list: bad_payload naming it", async () => {
  const stage = await rig({ responses: [{ content: [{ type: "text", text: "must not run" }] }] });
  try {
    const failures = new Map<string, (err: Error) => void>();
    stage.worker().worker.on("failed", (job, err) => failures.get(String(job?.id))?.(err));
    let jobCount = 0;
    for (const [name, value] of Object.entries(ATTACKS)) {
      const failed = await directJob(stage, failures, { CI: "true", [name]: value }, jobCount++);
      assert.match(failed.message, new RegExp(`env ${name} may not be set by a job`), name);
      assert.equal(failed.kind, "bad_payload");
    }
    const unlisted = await directJob(stage, failures, { GREETING: "hello" }, jobCount++);
    assert.match(unlisted.message, /env GREETING may not be set by a job: .*TURNSTREAM_JOB_ENV_ALLOW/);
    assert.equal(unlisted.kind, "bad_payload");
    assert.equal(stage.server.requests().length, 0, "no CLI was started");
  } finally {
    await stage.dispose();
  }
});

/** The names in the output of `env` that one Bash call printed, from the attempt's tool result. */
function envNamesPrinted(lines: Record<string, unknown>[]): Set<string> {
  const result = lines.find((l) => l["type"] === "user" && l["tool_use_result"] !== undefined);
  const stdout = String((result?.["tool_use_result"] as { stdout?: unknown } | undefined)?.stdout ?? "");
  const names = stdout.split("\n").map((l) => /^([A-Za-z_][A-Za-z0-9_]*)=/.exec(l)?.[1]);
  return new Set(names.filter((n): n is string => n !== undefined));
}

test("a turn's Bash env: the minimal base, what the worker gives, the job's allowed names; no other worker variable", async () => {
  const planted = {
    TURNSTREAM_CANARY_SECRET: "canary-5f1e9a0c7d2b",
    UNRELATED_WORKER_VAR: "worker-only",
    GIT_SSH_COMMAND: "touch /tmp/pwned",
  };
  Object.assign(process.env, planted);
  const stage = await rig({
    responses: [
      { content: [{ type: "tool_use", name: "Bash", input: { command: "env", description: "print the env" } }] },
      { content: [{ type: "text", text: "printed" }] },
    ],
  });
  try {
    // The planted variables stay in the worker's environment while the turn runs.
    // Unsandboxed: the tool sandbox adds routing variables of its own (proxies, GIT_SSH_COMMAND), and this
    // test is about what the worker passes.
    stage.worker({ runEnv: { OPERATOR_RUN_SETTING: "on" }, toolSandbox: { mode: "off" } });
    const queued = await stage.producer.enqueueTurn({
      prompt: "print the env",
      cwd: stage.ws,
      options: { allowedTools: ["Bash"], env: { GITHUB_REPOSITORY: "acme/api", TZ: "UTC" } },
    });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const names = envNamesPrinted(cliLines(await stage.events(queued.session, queued.turn), 1));
    for (const name of ["GITHUB_REPOSITORY", "TZ", "OPERATOR_RUN_SETTING"]) {
      assert.ok(names.has(name), `the job's allowed names and the worker's runEnv reach the tool: ${name}`);
    }
    for (const name of Object.keys(planted)) assert.ok(!names.has(name), `${name} of the worker's env stayed out`);
    const raw = JSON.stringify(await stage.events(queued.session));
    for (const value of Object.values(planted)) assert.ok(!raw.includes(value), `${value} appears nowhere`);
    // Every name is the base, what the worker gives (model access, CLI settings, runEnv), the run's
    // config home, the job's, or one the CLI sets for its shell.
    const host = process.env;
    const gitGuard: Record<string, string> = {};
    guardGit(gitGuard);
    const expected = new Set([
      ...Object.keys(gitGuard),
      ...Object.keys({
        ...baseEnv(host),
        ...modelAccessEnv(host),
        ...cliSettingsEnv(host),
        ...cliEnv(stage.server.url),
      }),
      ...["OPERATOR_RUN_SETTING", "GITHUB_REPOSITORY", "TZ", "FORCE_COLOR", "TURNSTREAM_TREE"],
      ...["CLAUDE_CONFIG_DIR", "TMPDIR", "CLAUDE_CODE_TMPDIR", "XDG_RUNTIME_DIR"],
    ]);
    const unexpected = [...names].filter((n) => !expected.has(n) && !CLI_SHELL_NAMES.has(n) && !n.startsWith("CLAUDE"));
    assert.deepEqual(unexpected, [], `names beyond the base: ${unexpected.join(",")}`);
  } finally {
    for (const name of Object.keys(planted)) delete process.env[name];
    await stage.dispose();
  }
});

test("`turnstream worker`: TURNSTREAM_RUN_ENV and allowed names reach a tool; REDIS_URL and the rest do not", async () => {
  const fleet = await processFleet(
    {
      responses: [
        { content: [{ type: "tool_use", name: "Bash", input: { command: "env", description: "print the env" } }] },
        { content: [{ type: "text", text: "printed" }] },
      ],
    },
    { allowEnv: ["DEPLOY_TARGET"] },
  );
  try {
    await fleet.start("env", {
      TURNSTREAM_RUN_ENV: "OPERATOR_SETTING",
      OPERATOR_SETTING: "on",
      TURNSTREAM_ALLOW_ENV: "DEPLOY_TARGET",
      TURNSTREAM_CANARY_SECRET: "canary-0b8d3f61c2a4",
      UNRELATED_WORKER_VAR: "worker-only",
    });
    const env = { DEPLOY_TARGET: "staging", GITHUB_SHA: "0123abc" };
    const options = { allowedTools: ["Bash"], env };
    const queued = await fleet.producer.enqueueTurn({ prompt: "print the env", cwd: fleet.ws, options });
    const res = await fleet.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const names = envNamesPrinted(cliLines(await readAll(fleet.producer.log, queued.session), 1));
    for (const name of ["OPERATOR_SETTING", "DEPLOY_TARGET", "GITHUB_SHA", "PATH"]) {
      assert.ok(names.has(name), `${name} reached the tool`);
    }
    const workerOnly = [
      "REDIS_URL",
      "TURNSTREAM_CANARY_SECRET",
      "UNRELATED_WORKER_VAR",
      "TURNSTREAM_PREFIX",
      "LOG_LEVEL",
    ];
    for (const name of [...workerOnly, "TURNSTREAM_WORKSPACE_ROOTS"]) {
      assert.ok(!names.has(name), `${name} of the worker's env stayed out`);
    }
  } finally {
    await fleet.dispose();
  }
});

// What the CLI and bash themselves put in a Bash tool's environment (besides the CLI's own CLAUDE* names).
const CLI_SHELL_NAMES = new Set([
  "PWD",
  "OLDPWD",
  "SHLVL",
  "_",
  "SHELL",
  "AI_AGENT",
  "GIT_EDITOR",
  "COREPACK_ENABLE_AUTO_PIN",
]);
CLI_SHELL_NAMES.add("NoDefaultCurrentDirectoryInExePath");

test("the library's runTurn: an overlay naming another program as CLAUDE_BIN does not choose the binary", async () => {
  const script = { responses: [{ content: [{ type: "text", text: "the real CLI answered" }] }] };
  const server = await startModelServer({ script });
  const space = testSpace();
  const dir = space.workspace();
  const marker = join(dir, "evil-ran");
  const evil = join(dir, "claude");
  writeFileSync(evil, `#!/bin/sh\ntouch ${marker}\n`);
  chmodSync(evil, 0o755);
  try {
    const env = { ...hermeticEnv(server.url), CLAUDE_BIN: evil, PATH: `${dir}:${process.env["PATH"] ?? ""}` };
    const turn = runTurn({ cwd: dir, prompt: "hi", env });
    const outcome = await turn.outcome;
    assert.equal(outcome.resultText, "the real CLI answered");
    assert.equal(existsSync(marker), false, "the overlay's program never ran");
  } finally {
    await server.close();
    space.cleanup();
  }
});
