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
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { SkillSpec } from "./options.ts";
import { injectSkills, installSkill, SKILLS_DIR } from "./skills.ts";
import { WorkspaceFiles } from "./workspace-files.ts";

const JOURNAL = join(SKILLS_DIR, ".turnstream-injection.json");
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
/** A replaced skill folder waits here (a dot name, so it is never listed as a skill). */
const savedName = (name: string): string => join(SKILLS_DIR, `.turnstream-saved-${name}`);

interface Journal {
  /** Whether the run lists its skills in CLAUDE.md (false: CLAUDE.md is never read or written). */
  claudeMdTouched: boolean;
  /** CLAUDE.md's bytes before the run (base64), or null when there was none. */
  claudeMd: string | null;
  /** `.skills` did not exist before: the whole folder goes. */
  skillsDirCreated: boolean;
  /** Skill folders the run wrote; `saved` when one of the same name was moved aside. */
  entries: Array<{ name: string; saved: boolean }>;
}

function readJournal(files: WorkspaceFiles): Journal | undefined {
  let bytes: Buffer | undefined;
  try {
    bytes = files.read(JOURNAL);
  } catch {
    return undefined; // a journal that is a link or no regular file is not ours: never read through it
  }
  if (bytes === undefined) return undefined;
  try {
    const parsed = JSON.parse(bytes.toString("utf8")) as Journal;
    const entries = Array.isArray(parsed.entries)
      ? parsed.entries.filter((e) => typeof e?.name === "string" && NAME.test(e.name) && !e.name.includes(".."))
      : [];
    const claudeMd = typeof parsed.claudeMd === "string" ? parsed.claudeMd : null;
    // A journal from before claudeMdTouched existed always listed its skills in CLAUDE.md.
    const claudeMdTouched = parsed.claudeMdTouched !== false;
    return { claudeMdTouched, claudeMd, skillsDirCreated: parsed.skillsDirCreated === true, entries };
  } catch {
    return undefined;
  }
}

function restoreClaudeMd(files: WorkspaceFiles, bytes: string | null): void {
  const want = bytes === null ? undefined : Buffer.from(bytes, "base64");
  const st = files.stat("CLAUDE.md");
  if (want !== undefined && st?.isFile() === true && files.read("CLAUDE.md")!.equals(want)) return;
  // Whatever stands there now (the run may have made it a link) goes; the bytes come back as a new file.
  files.remove("CLAUDE.md");
  if (want !== undefined) files.write("CLAUDE.md", want, { exclusive: true });
}

function restoreSkillFolders(files: WorkspaceFiles, journal: Journal): void {
  for (const entry of journal.entries) {
    files.remove(join(SKILLS_DIR, entry.name));
    const saved = savedName(entry.name);
    if (entry.saved && files.stat(saved) !== undefined) files.rename(saved, join(SKILLS_DIR, entry.name));
  }
}

/**
 * Puts back what a skill injection in `cwd` changed, from its journal (a finished run, or one whose
 * worker was killed before it could). Returns whether there was anything to restore. A `.skills` or
 * journal that is a link is never read or written through (WorkspacePathError names it).
 */
export function restoreSkillInjection(cwd: string): boolean {
  if (!existsSync(cwd)) return false; // the run removed its workspace: nothing left to restore
  const files = new WorkspaceFiles(cwd);
  const skillsDir = files.stat(SKILLS_DIR);
  // A `.skills` that is a link (planted, or made by the run) is never walked into: it could point anywhere.
  if (skillsDir === undefined || !skillsDir.isDirectory()) return false;
  const journal = readJournal(files);
  if (journal === undefined) return false;
  if (journal.claudeMdTouched) restoreClaudeMd(files, journal.claudeMd);
  if (journal.skillsDirCreated) {
    files.remove(SKILLS_DIR);
    return true;
  }
  restoreSkillFolders(files, journal);
  files.remove(JOURNAL);
  return true;
}

/** Records the cwd's state in the journal before anything changes. */
function writeJournal(files: WorkspaceFiles, skills: readonly SkillSpec[], claudeMdTouched: boolean): Journal {
  const skillsDirCreated = files.stat(SKILLS_DIR) === undefined;
  const claudeMd = claudeMdTouched ? files.read("CLAUDE.md") : undefined;
  files.mkdir(SKILLS_DIR);
  const replaces = (name: string): boolean => NAME.test(name) && files.stat(join(SKILLS_DIR, name)) !== undefined;
  const entries = skills.map((s) => ({ name: s.name, saved: !skillsDirCreated && replaces(s.name) }));
  const journal: Journal = {
    claudeMdTouched,
    claudeMd: claudeMd === undefined ? null : claudeMd.toString("base64"),
    skillsDirCreated,
    entries,
  };
  // O_EXCL: a journal (or a link) left where this one goes is refused, never written through.
  files.write(JOURNAL, JSON.stringify(journal), { exclusive: true });
  return journal;
}

/**
 * claude-md mode for one run: a journal is written, then the skills are injected (see injectSkills;
 * `listInClaudeMd: false` copies them only, for a run that lists them to the model itself, and never
 * reads or writes CLAUDE.md). Returns the undo, to call once the run is over; on a failure the cwd is
 * restored before the throw. Any link on the way (`.skills`, the journal, a skill folder, CLAUDE.md)
 * refuses the run with a WorkspacePathError naming it, and nothing outside the workspace is touched.
 */
export function injectSkillsForRun(
  cwd: string,
  skills: readonly SkillSpec[],
  options: { listInClaudeMd?: boolean } = {},
): () => void {
  const listInClaudeMd = options.listInClaudeMd !== false;
  // A run killed with its worker left its journal: put that back first, so this one records the original.
  restoreSkillInjection(cwd);
  const files = new WorkspaceFiles(cwd);
  let journaled = false;
  try {
    const journal = writeJournal(files, skills, listInClaudeMd);
    journaled = true;
    for (const entry of journal.entries)
      if (entry.saved) files.rename(join(SKILLS_DIR, entry.name), savedName(entry.name));
    if (listInClaudeMd) injectSkills(cwd, skills);
    else for (const skill of skills) installSkill(cwd, skill);
  } catch (err) {
    // Only a journal this run wrote is restored from: a planted one refused above is left alone.
    if (journaled) restoreSkillInjection(cwd);
    throw err;
  }
  return () => void restoreSkillInjection(cwd);
}
