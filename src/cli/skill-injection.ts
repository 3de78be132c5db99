// claude-md skills for one run, undone afterwards. injectSkills writes `.skills/<name>/` and a list in
// CLAUDE.md into the cwd; in a CI checkout that leaves the tree dirty. A run therefore records what was
// there before (CLAUDE.md's bytes or its absence, whether `.skills` existed, which skill folders it
// replaced) in a journal, `.skills/.turnstream-injection.json`, written before anything changes, and
// restores from it once the run's process tree is gone. A worker SIGKILLed mid-run cannot restore in
// process: the journal stays, and the next skill run in the same cwd (or restoreSkillInjection)
// restores from it first.
//
// The journal lies in the workspace, which is attacker input: it is read as data only (names checked,
// nothing followed out of the cwd), so a planted one can at most rewrite the workspace's own files.
import { existsSync, lstatSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { isAbsolute, join, relative, sep } from "node:path";
import { badOptions } from "./errors.ts";
import type { SkillSpec } from "./options.ts";
import { injectSkills, SKILLS_DIR } from "./skills.ts";

const JOURNAL = ".turnstream-injection.json";
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
/** A replaced skill folder waits here (a dot name, so it is never listed as a skill). */
const savedName = (name: string): string => `.turnstream-saved-${name}`;

interface Journal {
  /** CLAUDE.md's bytes before the run (base64), or null when there was none. */
  claudeMd: string | null;
  /** `.skills` did not exist before: the whole folder goes. */
  skillsDirCreated: boolean;
  /** Skill folders the run wrote; `saved` when one of the same name was moved aside. */
  entries: Array<{ name: string; saved: boolean }>;
}

function inside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel !== "" && !rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel);
}

const isLink = (path: string): boolean => existsSync(path) && lstatSync(path).isSymbolicLink();
/** lstat that tolerates a missing path (existsSync is false for a dangling link). */
function present(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/** The file CLAUDE.md stands for: itself, or where its link points when that stays inside the cwd. */
function claudeMdTarget(cwd: string): string {
  const path = join(cwd, "CLAUDE.md");
  if (!present(path) || !lstatSync(path).isSymbolicLink()) return path;
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    throw badOptions("cwd", `${path} is a dangling link`);
  }
  if (!inside(realpathSync(cwd), real)) throw badOptions("cwd", `${path} resolves outside the cwd`);
  return real;
}

function readJournal(skillsDir: string): Journal | undefined {
  const file = join(skillsDir, JOURNAL);
  if (!present(file) || !lstatSync(file).isFile()) return undefined;
  try {
    const j = JSON.parse(readFileSync(file, "utf8")) as Journal;
    const entries = Array.isArray(j.entries) ? j.entries.filter((e) => typeof e?.name === "string" && NAME.test(e.name) && !e.name.includes("..")) : [];
    return { claudeMd: typeof j.claudeMd === "string" ? j.claudeMd : null, skillsDirCreated: j.skillsDirCreated === true, entries };
  } catch {
    return undefined;
  }
}

function restoreClaudeMd(cwd: string, bytes: string | null): void {
  const link = join(cwd, "CLAUDE.md");
  let target: string;
  try {
    target = claudeMdTarget(cwd);
  } catch {
    // The run turned it into a link out of the cwd: drop the link rather than write through it.
    unlinkSync(link);
    target = link;
  }
  if (bytes === null) {
    rmSync(link, { force: true });
    return;
  }
  const want = Buffer.from(bytes, "base64");
  if (present(target) && lstatSync(target).isFile() && readFileSync(target).equals(want)) return;
  writeFileSync(target, want);
}

function restoreSkillFolders(skillsDir: string, j: Journal): void {
  for (const e of j.entries) {
    rmSync(join(skillsDir, e.name), { recursive: true, force: true });
    if (e.saved && present(join(skillsDir, savedName(e.name)))) renameSync(join(skillsDir, savedName(e.name)), join(skillsDir, e.name));
  }
}

/**
 * Puts back what a skill injection in `cwd` changed, from its journal (a finished run, or one whose
 * worker was killed before it could). Returns whether there was anything to restore.
 */
export function restoreSkillInjection(cwd: string): boolean {
  const skillsDir = join(cwd, SKILLS_DIR);
  // A `.skills` the run replaced with a link is never walked into: it could point anywhere.
  if (isLink(skillsDir)) return false;
  const j = readJournal(skillsDir);
  if (j === undefined) return false;
  restoreClaudeMd(cwd, j.claudeMd);
  if (j.skillsDirCreated) {
    rmSync(skillsDir, { recursive: true, force: true });
    return true;
  }
  restoreSkillFolders(skillsDir, j);
  rmSync(join(skillsDir, JOURNAL), { force: true });
  return true;
}

/** Records the cwd's state in the journal before anything changes, and moves replaced skill folders aside. */
function writeJournal(cwd: string, skills: readonly SkillSpec[]): void {
  const skillsDir = join(cwd, SKILLS_DIR);
  const claudeMd = claudeMdTarget(cwd);
  const skillsDirCreated = !present(skillsDir);
  const entries = skills.map((s) => ({ name: s.name, saved: !skillsDirCreated && NAME.test(s.name) && present(join(skillsDir, s.name)) }));
  const journal: Journal = { claudeMd: existsSync(claudeMd) ? readFileSync(claudeMd).toString("base64") : null, skillsDirCreated, entries };
  mkdirSync(skillsDir, { recursive: true });
  if (!inside(realpathSync(cwd), realpathSync(skillsDir))) throw badOptions("cwd", `${skillsDir} resolves outside the cwd`);
  writeFileSync(join(skillsDir, JOURNAL), JSON.stringify(journal), { mode: 0o600 });
  for (const e of entries) if (e.saved) renameSync(join(skillsDir, e.name), join(skillsDir, savedName(e.name)));
}

/**
 * claude-md mode for one run: a journal is written, then the skills are injected (see injectSkills).
 * Returns the undo, to call once the run is over; on a failure the cwd is restored before the throw.
 */
export function injectSkillsForRun(cwd: string, skills: readonly SkillSpec[]): () => void {
  // A run killed with its worker left its journal: put that back first, so this one records the original.
  restoreSkillInjection(cwd);
  try {
    writeJournal(cwd, skills);
    injectSkills(cwd, skills);
  } catch (err) {
    restoreSkillInjection(cwd);
    throw err;
  }
  return () => void restoreSkillInjection(cwd);
}
