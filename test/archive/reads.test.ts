// Reads that do not care where a session lives: a real session (a worker process running the real CLI,
// queued with `turnstream run`) is read by every command while it is in Redis, then copied into a file
// archive and removed from Redis; each command given the archive then says exactly what it said before,
// byte for byte, and the dashboard's JSON for the session is the same. An edited archive file is
// untrusted input: refused with a message, never shown.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { gunzipSync, gzipSync } from "node:zlib";
import { join } from "node:path";
import { copyOfSession, FileArchive } from "../../src/archive/index.ts";
import { startDashboard } from "../../src/dashboard/index.ts";
import { createEventLog } from "../../src/log/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { turnstream } from "../bin/_cli.ts";
import { cleanupKeys, cliEnv, redisFor, startWorkerProcess, testSpace } from "../worker/_support.ts";

const script = {
  responses: [
    { content: [{ type: "tool_use", name: "Bash", input: { command: "echo archived-marker", description: "echo" } }] },
    { content: [{ type: "text", text: "all archived" }] },
  ],
};

/** Every command's output for `session`, as `env` (the prefix, maybe an archive) finds it. */
async function outputsOf(
  session: string,
  env: Record<string, string>,
  extra: string[] = [],
): Promise<Record<string, string>> {
  const runs: Record<string, string[]> = {
    replay: ["replay", session],
    replayJson: ["replay", session, "--format", "json"],
    replayUntil: ["replay", session, "--until", "4"],
    replayMessages: ["replay", session, "--format", "messages", "--until", "6"],
    export: ["export", session],
    recordScript: ["record-script", session],
    tail: ["tail", session],
    tailJson: ["tail", session, "--json", "--from", "3"],
  };
  const out: Record<string, string> = {};
  for (const [name, args] of Object.entries(runs)) {
    const run = await turnstream([...args, ...extra], env);
    assert.equal(run.code, 0, `${name}: ${run.stderr}`);
    out[name] = run.stdout;
  }
  const listed = await turnstream(["sessions", "--json", ...extra], env);
  assert.equal(listed.code, 0, listed.stderr);
  out["sessionsRow"] = listed.stdout.split("\n").find((line) => line.includes(JSON.stringify(session))) ?? "";
  return out;
}

/** The dashboard's JSON for the session at a few events (the session view's and a tool result's). */
async function dashboardAnswers(
  redis: ReturnType<typeof redisFor>,
  prefix: string,
  archive: FileArchive | undefined,
  session: string,
  lastSeq: number,
): Promise<string[]> {
  const dashboard = await startDashboard({ redis, prefix, archive, port: 0 });
  try {
    const answers: string[] = [];
    for (const path of [`api/sessions/${session}?until=${lastSeq}`, `api/sessions/${session}?until=3`]) {
      const res = await fetch(new URL(path, dashboard.url));
      answers.push(`${res.status} ${await res.text()}`);
    }
    return answers;
  } finally {
    await dashboard.close();
  }
}

test("an archived session reads the same as it did in Redis: replay, export, record-script, sessions, tail, dashboard", async () => {
  const space = testSpace();
  const server = await startModelServer({ script });
  const ws = space.workspace();
  const env = { TURNSTREAM_PREFIX: space.logPrefix, TURNSTREAM_QUEUE_PREFIX: space.queuePrefix };
  const worker = await startWorkerProcess({
    ...cliEnv(server.url),
    ...env,
    TURNSTREAM_WORKSPACE_ROOTS: ws,
    TURNSTREAM_INSTANCE_ROOT: space.dir("root"),
  });
  const redis = redisFor();
  const archiveDir = space.dir("archive");
  const archive = new FileArchive(archiveDir);
  let workerStopped = false;
  try {
    const ran = await turnstream(["run", "--wait", "--cwd", ws, "--allowed-tools", "Bash", "--", "say", "hi"], env);
    assert.equal(ran.code, 0, ran.stderr + ran.stdout);
    const session = /in session (\S+)/.exec(ran.stdout)?.[1];
    assert.ok(session);
    worker.kill("SIGTERM");
    await worker.exited;
    workerStopped = true;

    const inRedis = await outputsOf(session, env);
    assert.match(inRedis["replay"]!, /archived-marker/);
    assert.match(inRedis["sessionsRow"]!, /"source":"log"/);
    const lastSeq = (await createEventLog({ redis, prefix: space.logPrefix }).stat(session)).lastSeq;
    const dashboardInRedis = await dashboardAnswers(redis, space.logPrefix, undefined, session, lastSeq);
    assert.match(dashboardInRedis[0]!, /^200 /);

    await archive.migrate();
    const log = createEventLog({ redis, prefix: space.logPrefix });
    await archive.put(await copyOfSession(log, redis, session));
    await cleanupKeys(redis, space);
    assert.equal((await log.stat(session)).exists, false);

    const gone = await turnstream(["replay", session], env);
    assert.equal(gone.code, 2, "without the archive the session is unknown");
    const url = `file://${archiveDir}`;
    assert.deepEqual(await outputsOf(session, env, ["--archive", url]), inRedis);
    // TURNSTREAM_ARCHIVE is the default of --archive.
    const viaEnv = await turnstream(["export", session], { ...env, TURNSTREAM_ARCHIVE: url });
    assert.equal(viaEnv.stdout, inRedis["export"]);
    assert.deepEqual(await dashboardAnswers(redis, space.logPrefix, archive, session, lastSeq), dashboardInRedis);

    // rerun plays the archived recording back to the real CLI and finds the same run.
    const rerun = await turnstream(
      ["rerun", session, "--cwd", space.dir("rerun"), "--json", "--archive", url],
      { ...env, ...cliEnv(server.url) },
      120_000,
    );
    assert.equal(rerun.code, 0, rerun.stderr + rerun.stdout);
    assert.equal(JSON.parse(rerun.stdout).outcome, "finished");

    const followed = await turnstream(["tail", session, "--follow", "--archive", url], env, 30_000);
    assert.equal(followed.code, 0, followed.stderr);
    assert.equal(followed.stdout, inRedis["tail"]);
    assert.match(followed.stderr, /has ended and is archived .*not following/);

    // An archive file edited to claim a tool ran that never did: refused, never printed.
    const file = join(archiveDir, `${session}.jsonl.gz`);
    const lines = gunzipSync(readFileSync(file)).toString("utf8").split("\n");
    const forged = lines.map((line) => line.replace("archived-marker", "forged-marker"));
    writeFileSync(file, gzipSync(forged.join("\n")));
    const edited = await turnstream(["replay", session, "--archive", url], env);
    assert.notEqual(edited.code, 0);
    assert.doesNotMatch(edited.stdout, /forged-marker/);
    assert.match(edited.stderr, /archive/i);
    const editedTail = await turnstream(["tail", session, "--archive", url], env);
    assert.notEqual(editedTail.code, 0);
    assert.equal(editedTail.stdout, "", "nothing of an edited copy is printed");
  } finally {
    if (!workerStopped) {
      worker.kill("SIGTERM");
      await worker.exited;
    }
    await archive.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    await server.close();
    space.cleanup();
  }
});
