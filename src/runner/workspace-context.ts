// An untrusted workspace gives the model context, never code. Such a run starts the CLI with only the
// setting sources turnstream controls (`--setting-sources user --strict-mcp-config`), which keeps the
// workspace's settings, hooks and MCP servers out, and with them its CLAUDE.md and `.claude/skills`.
// Those two are text the model should still see, so they are read here and handed to the run as part
// of its appended system prompt; the skills are listed with their SKILL.md paths for the model to read,
// not installed, since a skill's front matter can pre-approve tools and run commands.
//
// Only regular files inside the workspace are read: a link out of it would copy the worker's own files
// into the prompt.
import { readdirSync, realpathSync } from "node:fs";
import { isAbsolute, join, relative, sep } from "node:path";
import { SKILL_INSTRUCTION, skillDescription, type ListedSkill } from "./skills.ts";
import { readRegularFile } from "./workspace-files.ts";

/** The project instruction files the CLI itself would load from a trusted workspace. */
const INSTRUCTION_FILES = ["CLAUDE.md", join(".claude", "CLAUDE.md")];
const MAX_INSTRUCTION_BYTES = 64 * 1024;
const MAX_SKILLS = 100;

function inside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel !== "" && !rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel);
}

/** The file's real path when it is a regular file inside `root` (itself a real path), else undefined. */
function fileInside(root: string, path: string): string | undefined {
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    return undefined;
  }
  return inside(root, real) ? real : undefined;
}

/** Up to `max` bytes of a regular file, and whether there was more. */
function readCapped(path: string, max: number): { text: string; cut: boolean } | undefined {
  const read = readRegularFile(path, max);
  return read === undefined ? undefined : { text: read.bytes.toString("utf8"), cut: read.cut };
}

function instructions(root: string): string[] {
  const out: string[] = [];
  for (const name of INSTRUCTION_FILES) {
    const real = fileInside(root, join(root, name));
    const read = real === undefined ? undefined : readCapped(real, MAX_INSTRUCTION_BYTES);
    if (read === undefined || read.text.trim() === "") continue;
    const cut = read.cut ? `\n[… cut at ${MAX_INSTRUCTION_BYTES} bytes]` : "";
    out.push(`Contents of ${name} (project instructions, checked into the codebase):\n\n${read.text.trimEnd()}${cut}`);
  }
  return out;
}

/** Skills under `<cwd>/.claude/skills/<name>/SKILL.md`, each a regular file inside the workspace. */
export function workspaceSkills(cwd: string): ListedSkill[] {
  let root: string;
  try {
    root = realpathSync(cwd);
  } catch {
    return [];
  }
  const dir = join(root, ".claude", "skills");
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return [];
  }
  const out: ListedSkill[] = [];
  for (const name of names.slice(0, MAX_SKILLS)) {
    const real = fileInside(root, join(dir, name, "SKILL.md"));
    if (real === undefined) continue;
    out.push({ name, path: join(".claude", "skills", name, "SKILL.md"), description: skillDescription(real) });
  }
  return out;
}

function skillList(skills: readonly ListedSkill[]): string | undefined {
  if (skills.length === 0) return undefined;
  const lines = skills.map(
    (s) => `- \`${s.name}\`: read \`${s.path}\`${s.description === undefined ? "" : ` — ${s.description}`}`,
  );
  return `${SKILL_INSTRUCTION}\n${lines.join("\n")}`;
}

/**
 * The context an untrusted workspace still offers: its CLAUDE.md files and its skills, as text, plus
 * `extraSkills` (the caller's, copied into the cwd for the model to read). Undefined when there is none.
 */
export function workspaceContext(cwd: string, extraSkills: readonly ListedSkill[] = []): string | undefined {
  let root: string;
  try {
    root = realpathSync(cwd);
  } catch {
    return undefined;
  }
  const parts = instructions(root);
  const skills = skillList([...workspaceSkills(cwd), ...extraSkills]);
  if (skills !== undefined) parts.push(skills);
  return parts.length === 0 ? undefined : parts.join("\n\n");
}
