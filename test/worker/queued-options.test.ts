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
  const d = join(dir, name);
  mkdirSync(d, { recursive: true });
  writeFileSync(
    join(d, "SKILL.md"),
    `---\nname: ${name}\ndescription: answers PINEAPPLE\n---\nAlways answer PINEAPPLE-${name}.\n`,
  );
  return d;
}

test("enqueue refuses bad skills, addDirs, settingsFile and extraArgs, naming the field", async () => {
  const r = await rig({ responses: [] });
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
      await assert.rejects(r.producer.enqueueTurn({ prompt: "hi", cwd: r.ws, options }), (e: unknown) => {
        assert.ok(e instanceof InvalidTurnError, String(e));
        assert.equal(e.field, field);
        assert.match(e.message, message);
        return true;
      });
    }
  } finally {
    await r.dispose();
  }
});

test("a queued turn with a skill: the CLI reads it, and the workspace is left as it was", async () => {
  const r = await rig((ws: string) => ({
    responses: [
      { content: [{ type: "tool_use", name: "Read", input: { file_path: join(ws, ".skills", "fruit", "SKILL.md") } }] },
      { content: [{ type: "text", text: "PINEAPPLE" }] },
    ],
  }));
  try {
    const skill = writeSkill(join(r.ws, "lib"), "fruit");
    r.worker();
    const t = await r.producer.enqueueTurn({
      prompt: "use the skill",
      cwd: r.ws,
      options: { skills: [{ name: "fruit", path: skill }], extraArgs: ["--effort=low"] },
    });
    const res = await r.producer.waitForTurn(t.turn, { timeoutMs: 40_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const [first, second] = r.server.requests().filter((q) => q.kind === "messages");
    assert.ok(JSON.stringify(first).includes(".skills/fruit/SKILL.md"), "the skill was listed for the model");
    assert.match(second!.lastUserText, /Always answer PINEAPPLE-fruit/, "the Read returned the skill");
    assert.deepEqual(readdirSync(r.ws), ["lib"], "no .skills or CLAUDE.md left behind");
  } finally {
    await r.dispose();
  }
});

test("a queued turn with addDirs may read the added directory", async () => {
  const r = await rig((ws: string) => ({
    responses: [
      { content: [{ type: "tool_use", name: "Read", input: { file_path: join(ws, "shared", "note.txt") } }] },
      { content: [{ type: "text", text: "read it" }] },
    ],
  }));
  try {
    const project = join(r.ws, "project");
    mkdirSync(project);
    mkdirSync(join(r.ws, "shared"));
    writeFileSync(join(r.ws, "shared", "note.txt"), "SHARED-NOTE-4711\n");
    r.worker();
    const t = await r.producer.enqueueTurn({
      prompt: "read the note",
      cwd: project,
      options: { addDirs: [join(r.ws, "shared")] },
    });
    const res = await r.producer.waitForTurn(t.turn, { timeoutMs: 40_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const second = r.server.requests().filter((q) => q.kind === "messages")[1];
    assert.match(second!.lastUserText, /SHARED-NOTE-4711/, "the Read outside the cwd was allowed");
  } finally {
    await r.dispose();
  }
});

test("the worker refuses a settings file unless it trusts job workspaces, and paths outside its roots", async () => {
  const r = await rig({ responses: [{ content: [{ type: "text", text: "must not run" }] }] });
  try {
    const settings = join(r.ws, "settings.json");
    writeFileSync(settings, JSON.stringify({ hooks: {} }));
    r.worker();
    const withSettings = await r.producer.enqueueTurn({ prompt: "hi", cwd: r.ws, options: { settingsFile: settings } });
    const refused = await r.producer.waitForTurn(withSettings.turn, { timeoutMs: 30_000 });
    assert.equal(refused.status, "failed");
    assert.equal(refused.errorKind, "bad_options");
    const error = dataOf(refused.event)["error"] as { name: string; message: string };
    assert.equal(error.name, "SettingsFileRefused");
    assert.match(error.message, /options\.settingsFile.*TURNSTREAM_WORKSPACE_TRUST=job/);

    const outside = await r.producer.enqueueTurn({ prompt: "hi", cwd: r.ws, options: { addDirs: [r.space.root] } });
    const refusedPath = await r.producer.waitForTurn(outside.turn, { timeoutMs: 30_000 });
    const pathError = dataOf(refusedPath.event)["error"] as { name: string; message: string };
    assert.equal(pathError.name, "PathNotAllowed");
    assert.match(pathError.message, /^options\.addDirs\.0: .* is outside this worker's workspace roots/);
    assert.equal(r.server.requests().length, 0, "no CLI was started");
  } finally {
    await r.dispose();
  }
});

test("a job written to Redis directly meets the same extraArgs allow-list in the worker", async () => {
  const r = await rig({ responses: [{ content: [{ type: "text", text: "must not run" }] }] });
  try {
    const failed = new Promise<Error>((resolve) => r.worker().worker.on("failed", (_job, err) => resolve(err)));
    const session = `direct-${r.space.id}`;
    const turn = "t_directjob000002";
    await r.producer.order.register(session, turn, undefined);
    const job = {
      v: JOB_VERSION,
      session,
      turn,
      prompt: "hi",
      cwd: r.ws,
      queuedSeq: 0,
      enqueuedAt: new Date().toISOString(),
      options: { extraArgs: ["--plugin-dir=/tmp/evil"] },
    };
    await r.producer.queue.add("turn", job, { jobId: turn });
    assert.match((await failed).message, /options\.extraArgs\.0.*"--plugin-dir" is not a flag/);
    assert.equal(r.server.requests().length, 0, "no CLI was started");
    assert.ok(!existsSync(join(r.ws, ".skills")));
  } finally {
    await r.dispose();
  }
});

test("the worker refuses a skill folder that holds a link out of its workspace roots", async () => {
  const r = await rig({ responses: [{ content: [{ type: "text", text: "must not run" }] }] });
  try {
    const secret = join(r.space.dir("worker-secrets"), "key");
    writeFileSync(secret, "WORKER-SECRET");
    const skill = writeSkill(join(r.ws, "lib"), "leaky");
    mkdirSync(join(skill, "more"));
    symlinkSync(secret, join(skill, "more", "key"));
    r.worker();
    const t = await r.producer.enqueueTurn({
      prompt: "hi",
      cwd: r.ws,
      options: { skills: [{ name: "leaky", path: skill }] },
    });
    const res = await r.producer.waitForTurn(t.turn, { timeoutMs: 30_000 });
    assert.equal(res.status, "failed");
    const error = dataOf(res.event)["error"] as { name: string; message: string };
    assert.equal(error.name, "PathNotAllowed");
    assert.match(error.message, /^options\.skills\.0\.path: .*more\/key in the skill leads outside/);
    assert.equal(r.server.requests().length, 0, "no CLI was started");
    assert.deepEqual(readdirSync(r.ws), ["lib"], "nothing was copied into the workspace");
  } finally {
    await r.dispose();
  }
});

test("a worker that trusts job workspaces runs the job's settings file", async () => {
  const r = await rig({ responses: [{ content: [{ type: "text", text: "done" }] }] });
  try {
    const settings = join(r.ws, "settings.json");
    writeFileSync(settings, JSON.stringify({ model: "claude-from-the-settings-file" }));
    r.worker({ workspaceTrust: "job" });
    const t = await r.producer.enqueueTurn({ prompt: "hi", cwd: r.ws, options: { settingsFile: settings } });
    const res = await r.producer.waitForTurn(t.turn, { timeoutMs: 30_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const models = r.server
      .requests()
      .filter((q) => q.kind === "messages")
      .map((q) => q.model);
    assert.deepEqual(models, ["claude-from-the-settings-file"]);
  } finally {
    await r.dispose();
  }
});

test("a job that skipped the producer with skillsMode add-dir in an untrusted workspace: the worker fails it, naming the field, and starts no CLI", async () => {
  const r = await rig({ responses: [{ content: [{ type: "text", text: "must not run" }] }] });
  try {
    const failed = new Promise<Error>((resolve) => r.worker().worker.on("failed", (_job, err) => resolve(err)));
    const skill = writeSkill(join(r.ws, "lib"), "native");
    const session = `direct-${r.space.id}`;
    const turn = "t_directskill0001";
    await r.producer.order.register(session, turn, undefined);
    const options = { skills: [{ name: "native", path: skill }], skillsMode: "add-dir" };
    const enqueuedAt = new Date().toISOString();
    const job = { v: JOB_VERSION, session, turn, prompt: "hi", cwd: r.ws, queuedSeq: 0, enqueuedAt, options };
    await r.producer.queue.add("turn", job, { jobId: turn });
    assert.match((await failed).message, /`options\.skillsMode` "add-dir" loads skills natively/);
    assert.equal(r.server.requests().length, 0, "no CLI was started");
    assert.deepEqual(readdirSync(r.ws), ["lib"], "nothing placed in the workspace");
  } finally {
    await r.dispose();
  }
});

test("a workspace whose skill journal is a link to a worker file: the turn fails naming the link, the file is unchanged", async () => {
  const r = await rig({ responses: [{ content: [{ type: "text", text: "must not run" }] }] });
  try {
    const precious = join(r.space.dir("worker-files"), "config");
    writeFileSync(precious, "WORKER-CONFIG");
    mkdirSync(join(r.ws, ".skills"));
    symlinkSync(precious, join(r.ws, ".skills", ".turnstream-injection.json"));
    const skill = writeSkill(join(r.ws, "lib"), "fruit");
    r.worker();
    const options = { skills: [{ name: "fruit", path: skill }] };
    const t = await r.producer.enqueueTurn({ prompt: "hi", cwd: r.ws, options });
    const res = await r.producer.waitForTurn(t.turn, { timeoutMs: 30_000 });
    assert.equal(res.status, "failed");
    const error = dataOf(res.event)["error"] as { name: string; message: string };
    assert.match(error.message, /\.skills\/\.turnstream-injection\.json is a symbolic link/, JSON.stringify(error));
    assert.equal(readFileSync(precious, "utf8"), "WORKER-CONFIG");
    assert.equal(r.server.requests().length, 0, "no CLI was started");
    assert.deepEqual(readdirSync(join(r.ws, ".skills")), [".turnstream-injection.json"], "no skill was injected");
  } finally {
    await r.dispose();
  }
});
