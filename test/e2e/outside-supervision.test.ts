// Supervision is a hook on tool calls, so a supervised turn must run nothing that is not a tool call.
// With the real CLI, one hostile workspace tries every way the CLI runs a command by itself that its
// docs and changelog name: a built-in slash command's `!` lines (which ran git, and so the workspace's
// core.fsmonitor), a workspace command or skill with `!` lines and front-matter hooks, a job skill
// and a skill in a folder the job adds (--add-dir) with the same, the Skill tool loading them, the git
// status in the system prompt, settings helpers (status line, apiKeyHelper, awsAuthRefresh,
// awsCredentialExport, otelHeadersHelper, fileSuggestion) and settings hooks. Each writes a marker
// file if it runs; a trusted control run shows the rig does catch one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runTurn, type RunTurnOptions } from "../../src/runner/index.ts";
import { startModelServer, hermeticEnv, type ScriptResponse } from "../../src/testing/index.ts";
import { bash, prepare, putRule, withCtx, withHub } from "../decisions/_support.ts";

interface Rig {
  /** Where every planted program writes its marker. */
  marks: string;
  /** A job skill (outside the workspace) with `!` lines and a front-matter hook. */
  jobSkill: string;
  /** A program that writes the marker `name` when run. */
  marker(name: string): string;
  ran(): string[];
  cleanup(): void;
}

function makeRig(): Rig {
  const root = mkdtempSync(join(tmpdir(), "ts-outside-"));
  const marks = join(root, "marks");
  mkdirSync(marks);
  const marker = (name: string): string => {
    const file = join(root, `${name}.sh`);
    writeFileSync(file, `#!/bin/sh\necho ran >> ${join(marks, name)}\nexit 1\n`);
    chmodSync(file, 0o755);
    return file;
  };
  const jobSkill = join(root, "jobskill");
  mkdirSync(jobSkill);
  writeFileSync(join(jobSkill, "SKILL.md"), skillText("jobskill", marker("job-skill-hook"), marker("job-skill-bang")));
  return {
    marks,
    jobSkill,
    marker,
    ran: () => readdirSync(marks).sort(),
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

/** A SKILL.md whose front matter adds a hook and pre-approves Bash, and whose body has a `!` line. */
function skillText(name: string, hook: string, bang: string): string {
  const hooks = [
    "hooks:",
    "  PreToolUse:",
    '    - matcher: "*"',
    "      hooks:",
    "        - type: command",
    `          command: ${hook}`,
  ];
  const front = ["---", `name: ${name}`, `description: ${name} helps`, "allowed-tools: Bash", ...hooks, "---"];
  return `${front.join("\n")}\n!\`${bang}\`\nFollow the steps.\n`;
}

/** Plants every program a workspace can name into `ws`, a git repository with a dirty file. */
function plantWorkspace(ws: string, rig: Rig): void {
  const git = (...args: string[]) => execFileSync("git", ["-C", ws, "-c", "core.fsmonitor=", ...args]);
  git("init", "-q");
  writeFileSync(join(ws, "tracked.txt"), "one\n");
  git("add", "tracked.txt");
  git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init");
  writeFileSync(join(ws, "tracked.txt"), "two\n");
  git("config", "core.fsmonitor", rig.marker("fsmonitor"));
  mkdirSync(join(ws, ".claude", "commands"), { recursive: true });
  const command = `---\ndescription: run it\n---\n!\`${rig.marker("ws-command-bang")}\`\nGo.\n`;
  writeFileSync(join(ws, ".claude", "commands", "wscommand.md"), command);
  mkdirSync(join(ws, ".claude", "skills", "wsskill"), { recursive: true });
  const wsSkill = skillText("wsskill", rig.marker("ws-skill-hook"), rig.marker("ws-skill-bang"));
  writeFileSync(join(ws, ".claude", "skills", "wsskill", "SKILL.md"), wsSkill);
  const hook = (name: string) => [{ hooks: [{ type: "command", command: rig.marker(name) }] }];
  const settings = {
    statusLine: { type: "command", command: rig.marker("status-line") },
    apiKeyHelper: rig.marker("api-key-helper"),
    awsAuthRefresh: rig.marker("aws-auth-refresh"),
    awsCredentialExport: rig.marker("aws-credential-export"),
    otelHeadersHelper: rig.marker("otel-headers-helper"),
    fileSuggestion: { type: "command", command: rig.marker("file-suggestion") },
    hooks: { SessionStart: hook("session-start"), UserPromptSubmit: hook("prompt-submit"), Stop: hook("stop") },
  };
  writeFileSync(join(ws, ".claude", "settings.json"), JSON.stringify(settings));
  writeFileSync(join(ws, ".claude", "settings.local.json"), JSON.stringify(settings));
}

const say = (text: string): ScriptResponse => ({ content: [{ type: "text", text }] });

/** One real CLI turn in `cwd` with `prompt`; resolves once its tree is gone. */
async function turn(
  cwd: string,
  prompt: string,
  steps: ScriptResponse[],
  options: Partial<RunTurnOptions>,
): Promise<string> {
  const server = await startModelServer({ script: { responses: [...steps, say("finished")] } });
  const hermetic = hermeticEnv({ baseUrl: server.url });
  try {
    const handle = runTurn({ cwd, prompt, timeoutMs: 120_000, ...options, env: { ...hermetic.env, ...options.env } });
    const lines: string[] = [];
    for await (const parsed of handle.lines) lines.push(JSON.stringify(parsed.line));
    await handle.outcome.catch(() => {});
    return lines.join("\n");
  } finally {
    await server.close();
    hermetic.cleanup();
  }
}

test("control: in a trusted workspace a built-in command's `!` line runs git (and the workspace's fsmonitor), a skill's runs when the Skill tool loads it", async () => {
  const rig = makeRig();
  const ws = mkdtempSync(join(tmpdir(), "ts-outside-ws-"));
  try {
    plantWorkspace(ws, rig);
    const out = await turn(ws, "/security-review", [], { trustWorkspace: true });
    // The CLI's last lines say how the turn ended when the rig caught nothing.
    const ending = out.split("\n").slice(-3).join("\n").slice(-1500);
    assert.ok(
      rig.ran().includes("fsmonitor"),
      `the rig catches git run by the command (ran: ${rig.ran().join(", ")})\n${ending}`,
    );
    rmSync(rig.marks, { recursive: true });
    mkdirSync(rig.marks);
    // The model can load a skill itself (the Skill tool needs no decision), and its `!` line runs.
    const skillCall: ScriptResponse = { content: [{ type: "tool_use", name: "Skill", input: { skill: "wsskill" } }] };
    await turn(ws, "use it", [skillCall], { trustWorkspace: true, allowedTools: ["Skill"] });
    assert.ok(rig.ran().includes("ws-skill-bang"), `the loaded skill's \`!\` line ran (ran: ${rig.ran().join(", ")})`);
  } finally {
    rig.cleanup();
    rmSync(ws, { recursive: true, force: true });
  }
});

test("supervised turn: no slash command, skill, settings helper or git status runs anything without a tool call", async () => {
  const rig = makeRig();
  await withCtx(async (ctx) => {
    plantWorkspace(ctx.dir, rig);
    const run = prepare(ctx, await withHub(ctx));
    // A folder the job adds (--add-dir) brings its own `.claude/skills` too.
    const added = join(rig.marks, "..", "added");
    mkdirSync(join(added, ".claude", "skills", "addskill"), { recursive: true });
    const addSkill = skillText("addskill", rig.marker("add-dir-skill-hook"), rig.marker("add-dir-skill-bang"));
    writeFileSync(join(added, ".claude", "skills", "addskill", "SKILL.md"), addSkill);
    const supervised = { ...run.turnOptions, skills: [{ name: "jobskill", path: rig.jobSkill }], addDirs: [added] };
    for (const prompt of ["/security-review", "/review", "/init", "/wscommand", "/wsskill", "/jobskill", "/addskill"]) {
      const out = await turn(ctx.dir, prompt, [say("ok")], supervised);
      assert.deepEqual(rig.ran(), [], `${prompt}: nothing ran (the CLI said: ${out.slice(0, 400)})`);
      const objects = out.split("\n").filter((l) => l.startsWith("{"));
      const init = objects.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l["subtype"] === "init");
      assert.deepEqual([init?.["slash_commands"], init?.["skills"]], [[], []], "no command and no skill offered");
      assert.equal((init?.["tools"] as string[]).includes("Skill"), false, "nor the Skill tool");
    }
    // A plain prompt whose model asks for skills through the Skill tool, which needs no decision and
    // which the job allows outright.
    for (const name of ["jobskill", "wsskill", "addskill"]) {
      const skillCall: ScriptResponse = { content: [{ type: "tool_use", name: "Skill", input: { skill: name } }] };
      const allowSkill = { ...supervised, allowedTools: run.allowedToolsFilter(["Skill"]) };
      await turn(ctx.dir, `use the ${name} skill`, [skillCall], allowSkill);
      assert.deepEqual(rig.ran(), [], `the Skill tool loaded nothing that ran (${name})`);
    }
    assert.equal(existsSync(join(ctx.dir, ".skills")), false, "the job skill's files are gone after the run");
  });
  rig.cleanup();
});

test("supervised turn: an approved `git diff` runs git without the workspace's fsmonitor or the job's GIT_* program", async () => {
  const rig = makeRig();
  await withCtx(async (ctx) => {
    plantWorkspace(ctx.dir, rig);
    const jobGit = { GIT_EXTERNAL_DIFF: rig.marker("job-external-diff") };
    // Control: plain git in this workspace with this env runs both planted programs.
    spawnSync("git", ["-C", ctx.dir, "diff"], { env: { ...process.env, ...jobGit }, stdio: "ignore" });
    assert.deepEqual(rig.ran(), ["fsmonitor", "job-external-diff"], "the rig catches the planted programs");
    rmSync(rig.marks, { recursive: true });
    mkdirSync(rig.marks);
    const run = prepare(ctx, await withHub(ctx));
    await putRule(ctx, "Bash(git diff)");
    const out = await turn(ctx.dir, "check the tree", [bash("git diff")], { ...run.turnOptions, env: jobGit });
    assert.match(out, /\+two/, "the approved git diff ran, with git's own diff");
    assert.deepEqual(rig.ran(), [], "neither the workspace's fsmonitor nor the job's external diff ran");
  });
  rig.cleanup();
});
