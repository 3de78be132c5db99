// Skills reach the real CLI: CLAUDE.md pointer (claude-md) and --add-dir skill discovery.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClaudeCodeCliError, runTurn } from "../../src/cli/index.ts";
import { assertSkillWasRead, SkillNotReadError, type ParsedLine } from "../../src/protocol/index.ts";
import { startScriptedServer, type Step } from "../cli/_model.ts";
import { hermeticEnv } from "../cli/_support.ts";

function skill(name: string): string {
  const d = join(mkdtempSync(join(tmpdir(), "ts-skillsrc-")), name);
  mkdirSync(d);
  writeFileSync(join(d, "SKILL.md"), `---\nname: ${name}\ndescription: answers with the word PINEAPPLE-${name}\n---\nAlways answer PINEAPPLE.\n`);
  return d;
}

async function run(script: (cwd: string) => Step[], opts: { mode: "claude-md" | "add-dir"; name: string; trustWorkspace?: boolean; configHome?: boolean }) {
  const cwd = mkdtempSync(join(tmpdir(), "ts-skillcwd-"));
  const server = await startScriptedServer(script(cwd));
  try {
    const env = hermeticEnv(server.url);
    const home = opts.configHome === true ? { configHome: { instanceId: "skills", instanceRoot: join(env["TMPDIR"]!, "homes") } } : {};
    const h = runTurn({
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
    for await (const l of h.lines) lines.push(l);
    await h.outcome;
    return { cwd, lines, requests: server.requests(), tmp: env["TMPDIR"]! };
  } finally {
    await server.close();
  }
}

test("claude-md: the CLI loads the CLAUDE.md pointer, the model reads the skill, assertSkillWasRead passes", async () => {
  const r = await run((cwd) => [{ tool: { name: "Read", input: { file_path: join(cwd, ".skills", "fruit", "SKILL.md") } } }, { text: "PINEAPPLE" }], { mode: "claude-md", name: "fruit" });
  assert.ok(JSON.stringify(r.requests[0]).includes(".skills/fruit/SKILL.md"), "CLAUDE.md pointer reached the model");
  assert.ok(JSON.stringify(r.requests[1]).includes("Always answer PINEAPPLE"), "the Read returned the skill");
  assert.doesNotThrow(() => assertSkillWasRead(r.lines, "fruit"));
});

test("a run that never reads the skill fails assertSkillWasRead", async () => {
  const r = await run(() => [{ text: "I did not look" }], { mode: "claude-md", name: "unread" });
  assert.throws(() => assertSkillWasRead(r.lines, "unread"), SkillNotReadError);
});

test("add-dir, trusted workspace: the CLI discovers .claude/skills/<name> in the added dir; the temp dir is removed after the run", async () => {
  const r = await run(() => [{ tool: { name: "Skill", input: { skill: "berry" } } }, { text: "done" }], { mode: "add-dir", name: "berry", trustWorkspace: true });
  const first = JSON.stringify(r.requests[0]);
  assert.ok(first.includes("berry"), "skill advertised to the model");
  assert.ok(JSON.stringify(r.requests[1]).includes("Always answer PINEAPPLE"), "the Skill tool loaded it");
  assert.doesNotThrow(() => assertSkillWasRead(r.lines, "berry"));
  assert.deepEqual(readdirSync(r.tmp).filter((n) => n.startsWith("turnstream-")), [], "scratch and skill dirs removed");
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
