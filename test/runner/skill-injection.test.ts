// injectSkillsForRun's undo, and the journal a killed worker leaves for the next run to restore from.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { injectSkillsForRun, restoreSkillInjection } from "../../src/runner/index.ts";

const tmp = (p: string): string => mkdtempSync(join(tmpdir(), p));

function skillSource(name: string): string {
  const skillDir = join(tmp("ts-skill-"), name);
  mkdirSync(skillDir);
  writeFileSync(join(skillDir, "SKILL.md"), `---\nname: ${name}\ndescription: test skill ${name}\n---\nbody\n`);
  return skillDir;
}

test("a CLAUDE.md the run created is removed, and so is the .skills it created", () => {
  const cwd = tmp("ts-cwd-");
  const undo = injectSkillsForRun(cwd, [{ name: "alpha", path: skillSource("alpha") }]);
  assert.match(readFileSync(join(cwd, "CLAUDE.md"), "utf8"), /\.skills\/alpha\/SKILL\.md/);
  undo();
  assert.deepEqual(readdirSync(cwd), []);
});

test("a .skills that was there keeps its own skills; one of the same name comes back as it was", () => {
  const cwd = tmp("ts-cwd-");
  const crlf = Buffer.from("# rules\r\nno newline at end");
  writeFileSync(join(cwd, "CLAUDE.md"), crlf);
  mkdirSync(join(cwd, ".skills", "alpha"), { recursive: true });
  writeFileSync(join(cwd, ".skills", "alpha", "SKILL.md"), "the project's own alpha");
  mkdirSync(join(cwd, ".skills", "mine"));
  writeFileSync(join(cwd, ".skills", "mine", "SKILL.md"), "mine");
  const undo = injectSkillsForRun(cwd, [
    { name: "alpha", path: skillSource("alpha") },
    { name: "beta", path: skillSource("beta") },
  ]);
  assert.match(readFileSync(join(cwd, ".skills", "alpha", "SKILL.md"), "utf8"), /test skill alpha/);
  undo();
  assert.deepEqual(readdirSync(join(cwd, ".skills")).sort(), ["alpha", "mine"]);
  assert.equal(readFileSync(join(cwd, ".skills", "alpha", "SKILL.md"), "utf8"), "the project's own alpha");
  assert.ok(readFileSync(join(cwd, "CLAUDE.md")).equals(crlf), "CLAUDE.md byte for byte");
});

test("a worker killed mid-run leaves its journal; the next run in the cwd restores from it first", () => {
  const cwd = tmp("ts-cwd-");
  writeFileSync(join(cwd, "CLAUDE.md"), "original\n");
  injectSkillsForRun(cwd, [{ name: "alpha", path: skillSource("alpha") }]); // never undone: the worker died
  const undo = injectSkillsForRun(cwd, [{ name: "beta", path: skillSource("beta") }]);
  assert.ok(!existsSync(join(cwd, ".skills", "alpha")), "the dead run's skill is gone");
  assert.doesNotMatch(readFileSync(join(cwd, "CLAUDE.md"), "utf8"), /alpha/);
  undo();
  assert.deepEqual(readdirSync(cwd), ["CLAUDE.md"]);
  assert.equal(readFileSync(join(cwd, "CLAUDE.md"), "utf8"), "original\n");
  // Or by hand (a CI step after a crashed worker):
  injectSkillsForRun(cwd, [{ name: "gamma", path: skillSource("gamma") }]);
  assert.equal(restoreSkillInjection(cwd), true);
  assert.equal(restoreSkillInjection(cwd), false);
  assert.deepEqual(readdirSync(cwd), ["CLAUDE.md"]);
});

test("a failed injection (a bad skill path) leaves nothing behind", () => {
  const cwd = tmp("ts-cwd-");
  writeFileSync(join(cwd, "CLAUDE.md"), "x");
  assert.throws(
    () =>
      injectSkillsForRun(cwd, [
        { name: "ok", path: skillSource("ok") },
        { name: "bad", path: "/nonexistent/skill" },
      ]),
    /no skill at/,
  );
  assert.deepEqual(readdirSync(cwd), ["CLAUDE.md"]);
  assert.equal(readFileSync(join(cwd, "CLAUDE.md"), "utf8"), "x");
});
