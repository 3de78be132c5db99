// Offering skills to a run. Two ways:
// - claude-md: copy the skill to `<cwd>/.skills/<name>/SKILL.md` and list it in the cwd's CLAUDE.md,
//   which the CLI loads into context; the model then reads the file when the task fits. Every write in
//   the cwd goes through WorkspaceFiles, so a link planted there is refused, never followed.
// - add-dir (trusted workspaces only): a temp dir with `.claude/skills/<name>` links, passed with
//   --add-dir, so the CLI's own skill discovery loads them, front-matter hooks and `!` lines included.
//   Removed after the run.
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { badOptions } from "./errors.ts";
import type { SkillSpec } from "./options.ts";
import { readRegularFile, WorkspaceFiles } from "./workspace-files.ts";

export const SKILLS_DIR = ".skills";
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const INSTRUCTION_MARK = "<!-- turnstream:skills -->";
/** Most of a SKILL.md read for its description (the front matter comes first). */
const MAX_SKILL_BYTES = 64 * 1024;
/** Tells the model how to use a list of skills that follows it. */
export const SKILL_INSTRUCTION =
  `## Skills\n\nThis project provides skills. Before starting a task, check the list below; ` +
  `when a skill fits the task, read its SKILL.md in full first and follow it.\n`;
const INSTRUCTION = `${INSTRUCTION_MARK}\n${SKILL_INSTRUCTION}`;

function checkName(name: string): void {
  if (!NAME.test(name) || name.includes(".."))
    throw badOptions(
      "skills.name",
      `skill name ${JSON.stringify(name)} must be letters, digits, . _ - and contain no ..`,
    );
}

function inside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

/** The skill source: a SKILL.md file, or a directory holding one. */
function sourceOf(path: string): { dir: string | undefined; file: string } {
  if (!isAbsolute(path)) throw badOptions("skills.path", "skill path must be absolute");
  let st;
  try {
    st = statSync(path);
  } catch {
    throw badOptions("skills.path", `no skill at ${path}`);
  }
  if (st.isDirectory()) {
    const file = join(path, "SKILL.md");
    if (!existsSync(file)) throw badOptions("skills.path", `${path} holds no SKILL.md`);
    return { dir: path, file };
  }
  return { dir: basename(path) === "SKILL.md" ? dirname(path) : undefined, file: path };
}

/** The workspace's files, with `.skills` made as a real folder (a link there is refused, never followed). */
function skillsRoot(cwd: string): WorkspaceFiles {
  if (!isAbsolute(cwd)) throw badOptions("cwd", "must be an absolute path");
  const files = new WorkspaceFiles(cwd);
  files.mkdir(SKILLS_DIR);
  return files;
}

/** Copies a skill into `<cwd>/.skills/<name>/` (the whole folder when given one). Returns its SKILL.md path. */
export function installSkill(cwd: string, skill: SkillSpec): string {
  checkName(skill.name);
  const src = sourceOf(skill.path);
  return installIn(skillsRoot(cwd), skill.name, src);
}

/** Replaces `.skills/<name>` with a fresh copy of the skill; nothing under it is followed. */
function installIn(files: WorkspaceFiles, name: string, src: { dir: string | undefined; file: string }): string {
  const rel = join(SKILLS_DIR, name);
  files.remove(rel);
  if (src.dir !== undefined) files.copyIn(src.dir, rel);
  else {
    files.mkdir(rel);
    files.copyFileIn(src.file, join(rel, "SKILL.md"));
  }
  return files.path(join(rel, "SKILL.md"));
}

/** Skills installed under `<cwd>/.skills/`, as the model is told to read them (paths relative to the cwd). */
export function installedSkills(cwd: string, skills: readonly SkillSpec[]): ListedSkill[] {
  return skills.map((skill) => {
    const path = `${SKILLS_DIR}/${skill.name}/SKILL.md`;
    return { name: skill.name, path, description: skillDescription(join(cwd, path)) };
  });
}

/** The `description:` of a SKILL.md's front matter, on one line. */
export function skillDescription(skillMd: string): string | undefined {
  const read = readRegularFile(skillMd, MAX_SKILL_BYTES);
  return read === undefined ? undefined : descriptionOf(read.bytes.toString("utf8"));
}

function descriptionOf(text: string): string | undefined {
  const fm = /^---\r?\n([\s\S]*?)\r?\n---/.exec(text);
  const line = fm?.[1]?.split(/\r?\n/).find((l) => l.startsWith("description:"));
  const value = line
    ?.slice("description:".length)
    .trim()
    .replace(/^["']|["']$/g, "");
  return value === undefined || value === "" ? undefined : value.replace(/\s+/g, " ").slice(0, 300);
}

/**
 * Lists every skill under `<cwd>/.skills/` in `<cwd>/CLAUDE.md`. Existing content is kept, the
 * instruction is written once, and only skills not mentioned yet are appended. Returns the names added.
 */
export function pointClaudeMdAtSkills(cwd: string): string[] {
  const files = skillsRoot(cwd);
  const skillText = (name: string): string | undefined => {
    try {
      return files.read(join(SKILLS_DIR, name, "SKILL.md"))?.toString("utf8");
    } catch {
      return undefined; // a SKILL.md that is a link or no regular file is no skill
    }
  };
  const names = files
    .folders(SKILLS_DIR)
    .filter((n) => NAME.test(n) && skillText(n) !== undefined)
    .sort();
  const existing = files.read("CLAUDE.md")?.toString("utf8") ?? "";
  const added = names.filter((n) => !existing.includes(`${SKILLS_DIR}/${n}/SKILL.md`));
  if (added.length === 0) return [];
  let text = "";
  if (existing !== "" && !existing.endsWith("\n")) text += "\n";
  if (!existing.includes(INSTRUCTION_MARK)) text += (existing === "" ? "" : "\n") + INSTRUCTION + "\n";
  for (const name of added) {
    const description = descriptionOf(skillText(name)!);
    text += `- \`${name}\`: read \`${SKILLS_DIR}/${name}/SKILL.md\`${description === undefined ? "" : ` — ${description}`}\n`;
  }
  files.append("CLAUDE.md", text);
  return added;
}

/** claude-md mode for a list of skills. Returns each skill's SKILL.md path in the cwd. */
export function injectSkills(cwd: string, skills: readonly SkillSpec[]): string[] {
  const paths = skills.map((s) => installSkill(cwd, s));
  pointClaudeMdAtSkills(cwd);
  return paths;
}

/** A skill as it is listed for the model to read. */
export interface ListedSkill {
  name: string;
  /** Where the model reads it: relative to the cwd when inside it, else absolute. */
  path: string;
  description: string | undefined;
}

export interface SkillAddDir {
  dir: string;
  /** Each skill's SKILL.md in the dir, for runs whose CLI does not discover skills there itself. */
  skills: ListedSkill[];
  cleanup(): void;
}

/**
 * Places each skill at `<root>/<name>` (a link to its folder, a copy where a link fails), the layout
 * the CLI's own skill discovery reads. Returns each placed SKILL.md.
 */
function placeSkills(skills: readonly SkillSpec[], root: string): ListedSkill[] {
  mkdirSync(root, { recursive: true });
  const listed: ListedSkill[] = [];
  for (const skill of skills) {
    checkName(skill.name);
    const src = sourceOf(skill.path);
    const target = resolve(root, skill.name);
    if (!inside(root, target) || target === root)
      throw badOptions("skills.name", "skill target must stay inside the skills dir");
    let linked = false;
    if (src.dir !== undefined) {
      try {
        symlinkSync(src.dir, target, "dir");
        linked = true;
      } catch {
        linked = false;
      }
    }
    if (!linked) {
      if (src.dir !== undefined) cpSync(src.dir, target, { recursive: true, dereference: true });
      else {
        mkdirSync(target);
        writeFileSync(join(target, "SKILL.md"), readFileSync(src.file));
      }
    }
    const skillMd = join(target, "SKILL.md");
    listed.push({ name: skill.name, path: skillMd, description: skillDescription(skillMd) });
  }
  return listed;
}

/** add-dir mode: a temp dir with `.claude/skills/<name>` for each skill, to pass with --add-dir. */
export function prepareSkillAddDir(skills: readonly SkillSpec[], parent: string = tmpdir()): SkillAddDir {
  const dir = mkdtempSync(join(parent, "turnstream-skills-"));
  try {
    const listed = placeSkills(skills, join(dir, ".claude", "skills"));
    return { dir, skills: listed, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}
