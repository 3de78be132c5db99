// Workspace writes never follow links: a workspace ships links to files and folders outside it (a
// journal, `.skills` itself, a skill folder, CLAUDE.md, a parent folder, a FIFO) and the files
// outside stay as they were, the write refused with a WorkspacePathError naming the path.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, symlinkSync } from "node:fs";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  ClaudeCodeCliError,
  injectSkills,
  injectSkillsForRun,
  pointClaudeMdAtSkills,
  restoreSkillInjection,
  runTurn,
  WorkspaceFiles,
  WorkspacePathError,
} from "../../src/runner/index.ts";

const tmp = (p: string): string => mkdtempSync(join(tmpdir(), p));

function skillSource(name: string): string {
  const skillDir = join(tmp("ts-skill-"), name);
  mkdirSync(skillDir);
  writeFileSync(join(skillDir, "SKILL.md"), `---\nname: ${name}\ndescription: test skill ${name}\n---\nbody\n`);
  return skillDir;
}

/** A workspace and, outside it, a file and a folder an attacker's links point at. */
function setup(): { cwd: string; outsideFile: string; outsideDir: string } {
  const outside = tmp("ts-outside-");
  const outsideFile = join(outside, "precious.txt");
  writeFileSync(outsideFile, "PRECIOUS");
  const outsideDir = join(outside, "dir");
  mkdirSync(outsideDir);
  return { cwd: tmp("ts-ws-"), outsideFile, outsideDir };
}

/** The refusal names `path` (relative to the workspace) and says it is a link. */
function refusedAt(cwd: string, rel: string): (err: unknown) => boolean {
  return (err: unknown) => {
    assert.ok(err instanceof WorkspacePathError, `a WorkspacePathError, got ${String(err)}`);
    assert.ok(err instanceof ClaudeCodeCliError && err.kind === "bad_options");
    assert.equal(err.path, join(new WorkspaceFiles(cwd).root, rel));
    assert.equal(err.problem, "link");
    assert.match(err.message, /is a symbolic link/);
    return true;
  };
}

const skill = () => [{ name: "alpha", path: skillSource("alpha") }];

/** The refusal is a WorkspacePathError for `problem`. */
const refusedFor =
  (problem: string) =>
  (e: unknown): boolean =>
    e instanceof WorkspacePathError && e.problem === problem;

test("the journal shipped as a link to a file outside: the run is refused naming it, the file is unchanged", () => {
  const { cwd, outsideFile } = setup();
  mkdirSync(join(cwd, ".skills"));
  symlinkSync(outsideFile, join(cwd, ".skills", ".turnstream-injection.json"));
  assert.throws(() => injectSkillsForRun(cwd, skill()), refusedAt(cwd, ".skills/.turnstream-injection.json"));
  assert.equal(readFileSync(outsideFile, "utf8"), "PRECIOUS");
  assert.equal(existsSync(join(cwd, ".skills", "alpha")), false, "the skill was not injected");
  assert.equal(existsSync(join(cwd, "CLAUDE.md")), false);
  // restore never reads through it either
  assert.equal(restoreSkillInjection(cwd), false);
  assert.equal(readFileSync(outsideFile, "utf8"), "PRECIOUS");
});

test("a dangling journal link (to a path outside that does not exist yet) is refused, nothing created there", () => {
  const { cwd, outsideDir } = setup();
  mkdirSync(join(cwd, ".skills"));
  symlinkSync(join(outsideDir, "created.json"), join(cwd, ".skills", ".turnstream-injection.json"));
  assert.throws(() => injectSkillsForRun(cwd, skill()), refusedAt(cwd, ".skills/.turnstream-injection.json"));
  assert.deepEqual(readdirSync(outsideDir), []);
});

test("`.skills` itself a link to a folder outside: refused naming it, the folder stays empty", () => {
  const { cwd, outsideDir } = setup();
  symlinkSync(outsideDir, join(cwd, ".skills"));
  assert.throws(() => injectSkillsForRun(cwd, skill()), refusedAt(cwd, ".skills"));
  assert.throws(() => injectSkills(cwd, skill()), refusedAt(cwd, ".skills"));
  assert.throws(() => pointClaudeMdAtSkills(cwd), refusedAt(cwd, ".skills"));
  assert.deepEqual(readdirSync(outsideDir), []);
});

test("CLAUDE.md a link to a file outside: refused naming it, the file is unchanged, nothing left behind", () => {
  const { cwd, outsideFile } = setup();
  symlinkSync(outsideFile, join(cwd, "CLAUDE.md"));
  assert.throws(() => injectSkillsForRun(cwd, skill()), refusedAt(cwd, "CLAUDE.md"));
  assert.equal(existsSync(join(cwd, ".skills")), false, "refused before anything was written");
  assert.throws(() => injectSkills(cwd, skill()), refusedAt(cwd, "CLAUDE.md"));
  assert.equal(readFileSync(outsideFile, "utf8"), "PRECIOUS");
  assert.ok(lstatSync(join(cwd, "CLAUDE.md")).isSymbolicLink(), "the workspace's own link is left as it was");
});

test("a skill folder of the same name shipped as a link outside: moved aside, never written into, and put back", () => {
  const { cwd, outsideDir } = setup();
  mkdirSync(join(cwd, ".skills"));
  symlinkSync(outsideDir, join(cwd, ".skills", "alpha"));
  const undo = injectSkillsForRun(cwd, skill());
  assert.ok(lstatSync(join(cwd, ".skills", "alpha")).isDirectory(), "the run's copy is a real folder");
  assert.match(readFileSync(join(cwd, ".skills", "alpha", "SKILL.md"), "utf8"), /test skill alpha/);
  assert.deepEqual(readdirSync(outsideDir), [], "nothing written through the link");
  undo();
  assert.ok(lstatSync(join(cwd, ".skills", "alpha")).isSymbolicLink(), "the workspace's link is back");
  assert.deepEqual(readdirSync(outsideDir), []);
});

test("a hand-dropped skill whose SKILL.md links outside is not listed, and its target is not read into CLAUDE.md", () => {
  const { cwd, outsideFile } = setup();
  writeFileSync(outsideFile, "---\ndescription: SECRET-FROM-OUTSIDE\n---\n");
  mkdirSync(join(cwd, ".skills", "gamma"), { recursive: true });
  symlinkSync(outsideFile, join(cwd, ".skills", "gamma", "SKILL.md"));
  assert.deepEqual(pointClaudeMdAtSkills(cwd), []);
  assert.equal(existsSync(join(cwd, "CLAUDE.md")), false);
});

test("restore after the run turned CLAUDE.md into a link outside: the link goes, the original bytes come back as a file", () => {
  const { cwd, outsideFile } = setup();
  writeFileSync(join(cwd, "CLAUDE.md"), "original\n");
  const undo = injectSkillsForRun(cwd, skill());
  execFileSync("ln", ["-sf", outsideFile, join(cwd, "CLAUDE.md")]);
  undo();
  assert.equal(readFileSync(outsideFile, "utf8"), "PRECIOUS");
  assert.ok(lstatSync(join(cwd, "CLAUDE.md")).isFile());
  assert.equal(readFileSync(join(cwd, "CLAUDE.md"), "utf8"), "original\n");
  assert.equal(existsSync(join(cwd, ".skills")), false);
});

test("WorkspaceFiles: a parent folder that is a link is refused for write, mkdir, remove and rename", () => {
  const { cwd, outsideDir } = setup();
  writeFileSync(join(outsideDir, "keep.txt"), "KEEP");
  symlinkSync(outsideDir, join(cwd, "sub"));
  const files = new WorkspaceFiles(cwd);
  assert.throws(() => files.write("sub/new.txt", "x"), refusedAt(cwd, "sub"));
  assert.throws(() => files.mkdir("sub/deeper"), refusedAt(cwd, "sub"));
  assert.throws(() => files.remove("sub/keep.txt"), refusedAt(cwd, "sub"));
  assert.throws(() => files.rename("sub/keep.txt", "moved.txt"), refusedAt(cwd, "sub"));
  assert.throws(() => files.read("sub/keep.txt"), refusedAt(cwd, "sub"));
  assert.deepEqual(readdirSync(outsideDir), ["keep.txt"]);
  assert.equal(readFileSync(join(outsideDir, "keep.txt"), "utf8"), "KEEP");
  // Removing the link itself removes the link, never what it points at.
  files.remove("sub");
  assert.equal(existsSync(join(cwd, "sub")), false);
  assert.equal(readFileSync(join(outsideDir, "keep.txt"), "utf8"), "KEEP");
});

test("WorkspaceFiles: a FIFO where a file goes is refused at once (no hang); `..` and absolute paths are refused", () => {
  const { cwd } = setup();
  execFileSync("mkfifo", [join(cwd, "CLAUDE.md")]);
  const files = new WorkspaceFiles(cwd);
  assert.throws(() => files.append("CLAUDE.md", "x"), refusedFor("not a regular file"));
  assert.throws(() => files.read("CLAUDE.md"), refusedFor("not a regular file"));
  for (const bad of ["../escape", "/etc/passwd", "a/../../escape", "."]) {
    assert.throws(() => files.write(bad, "x"), refusedFor("outside"));
  }
});

test("runTurn with a claude-md skill into a workspace whose journal links outside: refused before the CLI starts", () => {
  const { cwd, outsideFile } = setup();
  mkdirSync(join(cwd, ".skills"));
  symlinkSync(outsideFile, join(cwd, ".skills", ".turnstream-injection.json"));
  assert.throws(
    () => runTurn({ cwd, prompt: "hi", skills: skill(), claudeBin: "/bin/false" }),
    refusedAt(cwd, ".skills/.turnstream-injection.json"),
  );
  assert.equal(readFileSync(outsideFile, "utf8"), "PRECIOUS");
});

test("a skill folder that holds the workspace, or loops through a link, is refused instead of copied forever", () => {
  const { cwd } = setup();
  writeFileSync(join(cwd, "SKILL.md"), "---\ndescription: the workspace itself\n---\n");
  assert.throws(() => injectSkillsForRun(cwd, [{ name: "self", path: cwd }]), refusedFor("inside its source"));
  assert.equal(existsSync(join(cwd, ".skills")), false, "undone");
  const looped = skillSource("looped");
  symlinkSync(looped, join(looped, "again"));
  const other = tmp("ts-ws-");
  assert.throws(() => injectSkillsForRun(other, [{ name: "looped", path: looped }]), refusedFor("too many entries"));
  assert.equal(existsSync(join(other, ".skills")), false, "undone");
});

test("an untrusted workspace whose CLAUDE.md and skill file are FIFOs: its context is read without hanging, the FIFOs skipped", async () => {
  const { cwd } = setup();
  execFileSync("mkfifo", [join(cwd, "CLAUDE.md")]);
  mkdirSync(join(cwd, ".claude", "skills", "pipe"), { recursive: true });
  execFileSync("mkfifo", [join(cwd, ".claude", "skills", "pipe", "SKILL.md")]);
  writeFileSync(join(cwd, ".claude", "CLAUDE.md"), "Rule FIFO-OK-5521.\n");
  const { workspaceContext } = await import("../../src/runner/workspace-context.ts");
  const context = workspaceContext(cwd) ?? "";
  assert.match(context, /FIFO-OK-5521/);
  assert.doesNotMatch(context, /Contents of CLAUDE\.md/);
});

test("a skill folder holding a FIFO is refused at once instead of blocking the copy", () => {
  const { cwd } = setup();
  const src = skillSource("piped");
  execFileSync("mkfifo", [join(src, "notes.txt")]);
  assert.throws(
    () => injectSkillsForRun(cwd, [{ name: "piped", path: src }]),
    (e: unknown) => refusedFor("not a regular file")(e) && (e as WorkspacePathError).path === join(src, "notes.txt"),
  );
  assert.equal(existsSync(join(cwd, ".skills")), false, "undone");
});

test("skills copied only (listInClaudeMd: false, as an untrusted run does): CLAUDE.md is never read or written", () => {
  const { cwd, outsideFile } = setup();
  symlinkSync(outsideFile, join(cwd, "CLAUDE.md"));
  const undo = injectSkillsForRun(cwd, skill(), { listInClaudeMd: false });
  assert.match(readFileSync(join(cwd, ".skills", "alpha", "SKILL.md"), "utf8"), /test skill alpha/);
  assert.equal(readFileSync(outsideFile, "utf8"), "PRECIOUS");
  undo();
  assert.ok(lstatSync(join(cwd, "CLAUDE.md")).isSymbolicLink(), "the workspace's link is left as it was");
  assert.equal(readFileSync(outsideFile, "utf8"), "PRECIOUS");
  assert.equal(existsSync(join(cwd, ".skills")), false);
});
