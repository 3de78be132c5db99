// Skills reach the real CLI: CLAUDE.md pointer (claude-md) and --add-dir skill discovery.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, mkdtempSync, symlinkSync } from "node:fs";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClaudeCodeCliError, runTurn } from "../../src/runner/index.ts";
import { assertSkillWasRead, SkillNotReadError, type ParsedLine } from "../../src/protocol/index.ts";
import { startScriptedServer, type Step } from "../runner/_model.ts";
import { hermeticEnv } from "../runner/_support.ts";

function skill(name: string): string {
  const skillDir = join(mkdtempSync(join(tmpdir(), "ts-skillsrc-")), name);
  mkdirSync(skillDir);
  writeFileSync(
    join(skillDir, "SKILL.md"),
    `---\nname: ${name}\ndescription: answers with the word PINEAPPLE-${name}\n---\nAlways answer PINEAPPLE.\n`,
  );
  return skillDir;
}

interface RunOpts {
  mode: "claude-md" | "add-dir";
  name: string;
  trustWorkspace?: boolean;
  configHome?: boolean;
  /** Lays out the workspace before the turn. */
  plant?: (cwd: string) => void;
}

async function run(script: (cwd: string) => Step[], opts: RunOpts) {
  const cwd = mkdtempSync(join(tmpdir(), "ts-skillcwd-"));
  opts.plant?.(cwd);
  const server = await startScriptedServer(script(cwd));
  try {
    const env = hermeticEnv(server.url);
    const home =
      opts.configHome === true
        ? { configHome: { instanceId: "skills", instanceRoot: join(env["TMPDIR"]!, "homes") } }
        : {};
    const handle = runTurn({
      cwd,
      prompt: "use the skill",
      env,
      skills: [{ name: opts.name, path: skill(opts.name) }],
      skillsMode: opts.mode,
      skipPermissions: true,
      sandboxed: true,
      trustWorkspace: opts.trustWorkspace === true,
      ...home,
    });
    const lines: ParsedLine[] = [];
    for await (const parsed of handle.lines) lines.push(parsed);
    await handle.outcome;
    return { cwd, lines, requests: server.requests(), tmp: env["TMPDIR"]! };
  } finally {
    await server.close();
  }
}

const readSkill =
  (name: string) =>
  (cwd: string): Step[] => [
    { tool: { name: "Read", input: { file_path: join(cwd, ".skills", name, "SKILL.md") } } },
    { text: "PINEAPPLE" },
  ];

test("claude-md, trusted workspace: the CLI loads the CLAUDE.md pointer, the model reads the skill, assertSkillWasRead passes", async () => {
  const result = await run(readSkill("fruit"), { mode: "claude-md", name: "fruit", trustWorkspace: true });
  assert.ok(
    JSON.stringify(result.requests[0]).includes(".skills/fruit/SKILL.md"),
    "CLAUDE.md pointer reached the model",
  );
  assert.ok(JSON.stringify(result.requests[1]).includes("Always answer PINEAPPLE"), "the Read returned the skill");
  assert.doesNotThrow(() => assertSkillWasRead(result.lines, "fruit"));
});

test("claude-md, untrusted workspace whose CLAUDE.md links to AGENTS.md: the skill is listed in the system prompt, CLAUDE.md is not written", async () => {
  const plant = (cwd: string): void => {
    writeFileSync(join(cwd, "AGENTS.md"), "Agent rule AGENTS-7781.\n");
    symlinkSync("AGENTS.md", join(cwd, "CLAUDE.md"));
  };
  const result = await run(readSkill("kiwi"), { mode: "claude-md", name: "kiwi", plant });
  const first = JSON.stringify(result.requests[0]);
  assert.ok(first.includes(".skills/kiwi/SKILL.md") && first.includes("PINEAPPLE-kiwi"), "listed with its description");
  assert.ok(first.includes("AGENTS-7781"), "the workspace's CLAUDE.md still reaches the model as text");
  assert.ok(JSON.stringify(result.requests[1]).includes("Always answer PINEAPPLE"), "the Read returned the skill");
  assert.equal(
    readFileSync(join(result.cwd, "AGENTS.md"), "utf8"),
    "Agent rule AGENTS-7781.\n",
    "nothing written through",
  );
  assert.ok(lstatSync(join(result.cwd, "CLAUDE.md")).isSymbolicLink());
  assert.equal(existsSync(join(result.cwd, ".skills")), false, "the copy is gone after the run");
});

test("a run that never reads the skill fails assertSkillWasRead", async () => {
  const result = await run(() => [{ text: "I did not look" }], { mode: "claude-md", name: "unread" });
  assert.throws(() => assertSkillWasRead(result.lines, "unread"), SkillNotReadError);
});

test("add-dir, trusted workspace: the CLI discovers .claude/skills/<name> in the added dir; the temp dir is removed after the run", async () => {
  const result = await run(() => [{ tool: { name: "Skill", input: { skill: "berry" } } }, { text: "done" }], {
    mode: "add-dir",
    name: "berry",
    trustWorkspace: true,
  });
  const first = JSON.stringify(result.requests[0]);
  assert.ok(first.includes("berry"), "skill advertised to the model");
  assert.ok(JSON.stringify(result.requests[1]).includes("Always answer PINEAPPLE"), "the Skill tool loaded it");
  assert.doesNotThrow(() => assertSkillWasRead(result.lines, "berry"));
  assert.deepEqual(
    readdirSync(result.tmp).filter((n) => n.startsWith("turnstream-")),
    [],
    "scratch and skill dirs removed",
  );
});

test("add-dir, untrusted workspace (with or without a config home): refused by name before the CLI starts", async () => {
  for (const configHome of [true, false]) {
    await assert.rejects(
      run(() => [{ text: "done" }], { mode: "add-dir", name: "plum", configHome }),
      (err: unknown) =>
        err instanceof ClaudeCodeCliError &&
        err.kind === "bad_options" &&
        /`skillsMode`: "add-dir" loads skills natively/.test(err.message),
    );
  }
});
