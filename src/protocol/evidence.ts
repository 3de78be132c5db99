// Evidence of what the agent actually did, taken from tool_use blocks only: text the model wrote
// (which may quote commands or paths) never counts.
import { foldMessages, type Fold, type ToolCall } from "./fold.ts";
import { isObj, TurnstreamError } from "../kernel/index.ts";
import { contentBlocks, objOf, parsedLines, type LinesInput } from "./lines.ts";

/** Bash commands the run called, in call order (subagents included). */
export function bashCommands(lines: LinesInput): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const p of parsedLines(lines)) {
    const o = objOf(p);
    if (o === undefined || o["type"] !== "assistant") continue;
    for (const b of contentBlocks(o)) {
      if (b["type"] !== "tool_use" || b["name"] !== "Bash" || !isObj(b["input"])) continue;
      const cmd = b["input"]["command"];
      const id = typeof b["id"] === "string" ? b["id"] : undefined;
      if (typeof cmd !== "string" || (id !== undefined && seen.has(id))) continue;
      if (id !== undefined) seen.add(id);
      out.push(cmd);
    }
  }
  return out;
}

export class SkillNotReadError extends TurnstreamError {
  readonly skill: string;
  constructor(skill: string) {
    super(
      `skill '${skill}' was not read: expected a successful Read of .skills/${skill}/SKILL.md ` +
        `(or .claude/skills/${skill}/SKILL.md) or a successful Skill tool call for it; ` +
        `check that the skill is installed and the prompt leads the agent to it`,
      { code: "skill_not_read" },
    );
    this.skill = skill;
  }
}

function readsSkillFile(call: ToolCall, name: string): boolean {
  if (call.name !== "Read" || !isObj(call.input)) return false;
  const path = call.input["file_path"];
  if (typeof path !== "string") return false;
  const p = path.replaceAll("\\", "/");
  return [`.skills/${name}/SKILL.md`, `.claude/skills/${name}/SKILL.md`].some((s) => p === s || p.endsWith("/" + s));
}

function callsSkill(call: ToolCall, name: string): boolean {
  if (call.name !== "Skill" || !isObj(call.input)) return false;
  const v = call.input["skill"] ?? call.input["command"];
  if (typeof v !== "string") return false;
  const s = v.replace(/^\//, "");
  // Plugin skills are named `<plugin>:<skill>`.
  return s === name || s.endsWith(":" + name);
}

/** The successful call that read the skill, or undefined. */
export function findSkillRead(lines: LinesInput | Fold, name: string): ToolCall | undefined {
  const fold =
    "toolCalls" in lines && lines.toolCalls instanceof Map ? (lines as Fold) : foldMessages(lines as LinesInput);
  for (const c of fold.toolCalls.values()) {
    if (c.result === undefined || c.result.isError) continue;
    if (readsSkillFile(c, name) || callsSkill(c, name)) return c;
  }
  return undefined;
}

/** Throws SkillNotReadError unless the run successfully read the skill `name`. */
export function assertSkillWasRead(lines: LinesInput | Fold, name: string): void {
  if (findSkillRead(lines, name) === undefined) throw new SkillNotReadError(name);
}
