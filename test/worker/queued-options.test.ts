// What a queued turn may bring besides its prompt: skills, addDirs, a settings file and allow-listed
// CLI flags. Refused at enqueue with the field named, checked again by the worker (paths under its
// workspace roots; a settings file only on a worker that trusts job workspaces), and run for real.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { InvalidTurnError, JOB_VERSION, type EnqueueInput } from "../../src/queue/index.ts";
import { dataOf, rig } from "./_more.ts";

function writeSkill(dir: string, name: string): string {
  const skillDir = join(dir, name);
  mkdirSync(skillDir, { recursive: true });
  writeFileSync(
    join(skillDir, "SKILL.md"),
    `---\nname: ${name}\ndescription: answers PINEAPPLE\n---\nAlways answer PINEAPPLE-${name}.\n`,
  );
  return skillDir;
}

test("enqueue refuses bad skills, addDirs, settingsFile and extraArgs, naming the field", async () => {
  const stage = await rig({ responses: [] });
  try {
    const cases: Array<[EnqueueInput["options"], string, RegExp]> = [
      [{ skills: [{ name: "../up", path: "/w/s" }] }, "options.skills.0.name", /letters, digits/],
      [{ skills: [{ name: "ok", path: "relative" }] }, "options.skills.0.path", /absolute/],
      [
        { skills: [{ name: "ok", path: "/w/s" }], skillsMode: "add-dir" },
        "options.skillsMode",
        /loads skills natively.*only with trustWorkspace: true/,
      ],
      [{ supervised: true, skillsMode: "add-dir" }, "options.skillsMode", /"claude-md"/],
      [{ addDirs: ["/ok", "rel/dir"] }, "options.addDirs.1", /absolute/],
      [{ settingsFile: "settings.json" }, "options.settingsFile", /absolute/],
      [{ supervised: true, settingsFile: "/w/settings.json" }, "options.settingsFile", /supervised/],
      [
        { extraArgs: ["--effort=high", "--mcp-config=/tmp/evil.json"] },
        "options.extraArgs.1",
        /"--mcp-config" is not a flag a queued turn may pass/,
      ],
      [{ extraArgs: ["--dangerously-skip-permissions"] }, "options.extraArgs.0", /--dangerously-skip-permissions/],
      [{ extraArgs: ["--fallback-model", "haiku"] }, "options.extraArgs.0", /--fallback-model=<value>/],
    ];
    for (const [options, field, message] of cases) {
      await assert.rejects(stage.producer.enqueueTurn({ prompt: "hi", cwd: stage.ws, options }), (thrown: unknown) => {
        assert.ok(thrown instanceof InvalidTurnError, String(thrown));
        assert.equal(thrown.field, field);
        assert.match(thrown.message, message);
        return true;
      });
    }
  } finally {
    await stage.dispose();
  }
});

test("a queued turn with a skill: the CLI reads it, and the workspace is left as it was", async () => {
  const stage = await rig((ws: string) => ({
    responses: [
      { content: [{ type: "tool_use", name: "Read", input: { file_path: join(ws, ".skills", "fruit", "SKILL.md") } }] },
      { content: [{ type: "text", text: "PINEAPPLE" }] },
    ],
  }));
  try {
    const skill = writeSkill(join(stage.ws, "lib"), "fruit");
    stage.worker();
    const queued = await stage.producer.enqueueTurn({
      prompt: "use the skill",
      cwd: stage.ws,
      options: { skills: [{ name: "fruit", path: skill }], extraArgs: ["--effort=low"] },
    });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 40_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const [first, second] = stage.server.requests().filter((q) => q.kind === "messages");
    assert.ok(JSON.stringify(first).includes(".skills/fruit/SKILL.md"), "the skill was listed for the model");
    assert.match(second!.lastUserText, /Always answer PINEAPPLE-fruit/, "the Read returned the skill");
    assert.deepEqual(readdirSync(stage.ws), ["lib"], "no .skills or CLAUDE.md left behind");
  } finally {
    await stage.dispose();
  }
});

test("a queued turn with addDirs may read the added directory", async () => {
  const stage = await rig((ws: string) => ({
    responses: [
      { content: [{ type: "tool_use", name: "Read", input: { file_path: join(ws, "shared", "note.txt") } }] },
      { content: [{ type: "text", text: "read it" }] },
    ],
  }));
  try {
    const project = join(stage.ws, "project");
    mkdirSync(project);
    mkdirSync(join(stage.ws, "shared"));
    writeFileSync(join(stage.ws, "shared", "note.txt"), "SHARED-NOTE-4711\n");
    stage.worker();
    const queued = await stage.producer.enqueueTurn({
      prompt: "read the note",
      cwd: project,
      options: { addDirs: [join(stage.ws, "shared")] },
    });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 40_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const second = stage.server.requests().filter((q) => q.kind === "messages")[1];
    assert.match(second!.lastUserText, /SHARED-NOTE-4711/, "the Read outside the cwd was allowed");
  } finally {
    await stage.dispose();
  }
});

test("the worker refuses a settings file unless it trusts job workspaces, and paths outside its roots", async () => {
  const stage = await rig({ responses: [{ content: [{ type: "text", text: "must not run" }] }] });
  try {
    const settings = join(stage.ws, "settings.json");
    writeFileSync(settings, JSON.stringify({ hooks: {} }));
    stage.worker();
    const withSettings = await stage.producer.enqueueTurn({
      prompt: "hi",
      cwd: stage.ws,
      options: { settingsFile: settings },
    });
    const refused = await stage.producer.waitForTurn(withSettings.turn, { timeoutMs: 30_000 });
    assert.equal(refused.status, "failed");
    assert.equal(refused.errorKind, "bad_options");
    const error = dataOf(refused.event)["error"] as { name: string; message: string };
    assert.equal(error.name, "SettingsFileRefused");
    assert.match(error.message, /options\.settingsFile.*TURNSTREAM_WORKSPACE_TRUST=job/);

    const outside = await stage.producer.enqueueTurn({
      prompt: "hi",
      cwd: stage.ws,
      options: { addDirs: [stage.space.root] },
    });
    const refusedPath = await stage.producer.waitForTurn(outside.turn, { timeoutMs: 30_000 });
    const pathError = dataOf(refusedPath.event)["error"] as { name: string; message: string };
    assert.equal(pathError.name, "PathNotAllowed");
    assert.match(pathError.message, /^options\.addDirs\.0: .* is outside this worker's workspace roots/);
    assert.equal(stage.server.requests().length, 0, "no CLI was started");
  } finally {
    await stage.dispose();
  }
});

test("a job written to Redis directly meets the same extraArgs allow-list in the worker", async () => {
  const stage = await rig({ responses: [{ content: [{ type: "text", text: "must not run" }] }] });
  try {
    const failed = new Promise<Error>((resolve) => stage.worker().worker.on("failed", (_job, err) => resolve(err)));
    const session = `direct-${stage.space.id}`;
    const turn = "t_directjob000002";
    await stage.producer.order.register(session, turn);
    const job = {
      v: JOB_VERSION,
      session,
      turn,
      prompt: "hi",
      cwd: stage.ws,
      queuedSeq: 0,
      enqueuedAt: new Date().toISOString(),
      options: { extraArgs: ["--plugin-dir=/tmp/evil"] },
    };
    await stage.producer.queue.add("turn", job, { jobId: turn });
    assert.match((await failed).message, /options\.extraArgs\.0.*"--plugin-dir" is not a flag/);
    assert.equal(stage.server.requests().length, 0, "no CLI was started");
    assert.ok(!existsSync(join(stage.ws, ".skills")));
  } finally {
    await stage.dispose();
  }
});

test("the worker refuses a skill folder that holds a link out of its workspace roots", async () => {
  const stage = await rig({ responses: [{ content: [{ type: "text", text: "must not run" }] }] });
  try {
    const secret = join(stage.space.dir("worker-secrets"), "key");
    writeFileSync(secret, "WORKER-SECRET");
    const skill = writeSkill(join(stage.ws, "lib"), "leaky");
    mkdirSync(join(skill, "more"));
    symlinkSync(secret, join(skill, "more", "key"));
    stage.worker();
    const queued = await stage.producer.enqueueTurn({
      prompt: "hi",
      cwd: stage.ws,
      options: { skills: [{ name: "leaky", path: skill }] },
    });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 30_000 });
    assert.equal(res.status, "failed");
    const error = dataOf(res.event)["error"] as { name: string; message: string };
    assert.equal(error.name, "PathNotAllowed");
    assert.match(error.message, /^options\.skills\.0\.path: .*more\/key in the skill leads outside/);
    assert.equal(stage.server.requests().length, 0, "no CLI was started");
    assert.deepEqual(readdirSync(stage.ws), ["lib"], "nothing was copied into the workspace");
  } finally {
    await stage.dispose();
  }
});

test("a worker that trusts job workspaces runs the job's settings file", async () => {
  const stage = await rig({ responses: [{ content: [{ type: "text", text: "done" }] }] });
  try {
    const settings = join(stage.ws, "settings.json");
    writeFileSync(settings, JSON.stringify({ model: "claude-from-the-settings-file" }));
    stage.worker({ workspaceTrust: "job" });
    const queued = await stage.producer.enqueueTurn({
      prompt: "hi",
      cwd: stage.ws,
      options: { settingsFile: settings },
    });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 30_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const models = stage.server
      .requests()
      .filter((q) => q.kind === "messages")
      .map((q) => q.model);
    assert.deepEqual(models, ["claude-from-the-settings-file"]);
  } finally {
    await stage.dispose();
  }
});

test("a job that skipped the producer with skillsMode add-dir in an untrusted workspace: the worker fails it, naming the field, and starts no CLI", async () => {
  const stage = await rig({ responses: [{ content: [{ type: "text", text: "must not run" }] }] });
  try {
    const failed = new Promise<Error>((resolve) => stage.worker().worker.on("failed", (_job, err) => resolve(err)));
    const skill = writeSkill(join(stage.ws, "lib"), "native");
    const session = `direct-${stage.space.id}`;
    const turn = "t_directskill0001";
    await stage.producer.order.register(session, turn);
    const options = { skills: [{ name: "native", path: skill }], skillsMode: "add-dir" };
    const enqueuedAt = new Date().toISOString();
    const job = { v: JOB_VERSION, session, turn, prompt: "hi", cwd: stage.ws, queuedSeq: 0, enqueuedAt, options };
    await stage.producer.queue.add("turn", job, { jobId: turn });
    assert.match((await failed).message, /`options\.skillsMode` "add-dir" loads skills natively/);
    assert.equal(stage.server.requests().length, 0, "no CLI was started");
    assert.deepEqual(readdirSync(stage.ws), ["lib"], "nothing placed in the workspace");
  } finally {
    await stage.dispose();
  }
});

test("a workspace whose skill journal is a link to a worker file: the turn fails naming the link, the file is unchanged", async () => {
  const stage = await rig({ responses: [{ content: [{ type: "text", text: "must not run" }] }] });
  try {
    const precious = join(stage.space.dir("worker-files"), "config");
    writeFileSync(precious, "WORKER-CONFIG");
    mkdirSync(join(stage.ws, ".skills"));
    symlinkSync(precious, join(stage.ws, ".skills", ".turnstream-injection.json"));
    const skill = writeSkill(join(stage.ws, "lib"), "fruit");
    stage.worker();
    const options = { skills: [{ name: "fruit", path: skill }] };
    const queued = await stage.producer.enqueueTurn({ prompt: "hi", cwd: stage.ws, options });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 30_000 });
    assert.equal(res.status, "failed");
    const error = dataOf(res.event)["error"] as { name: string; message: string };
    assert.match(error.message, /\.skills\/\.turnstream-injection\.json is a symbolic link/, JSON.stringify(error));
    assert.equal(readFileSync(precious, "utf8"), "WORKER-CONFIG");
    assert.equal(stage.server.requests().length, 0, "no CLI was started");
    assert.deepEqual(readdirSync(join(stage.ws, ".skills")), [".turnstream-injection.json"], "no skill was injected");
  } finally {
    await stage.dispose();
  }
});
