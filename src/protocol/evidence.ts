// Evidence of what the agent actually did, taken from tool_use blocks only: text the model wrote
// (which may quote commands or paths) never counts.
import { foldMessages, type Fold, type ToolCall } from "./fold.ts";
import { isObj, TurnstreamError } from "../kernel/index.ts";
import { contentBlocks, objOf, parsedLines, type LinesInput } from "./lines.ts";

/** Bash commands the run called, in call order (subagents included). */
export function bashCommands(lines: LinesInput): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const parsed of parsedLines(lines)) {
    const line = objOf(parsed);
    if (line === undefined || line["type"] !== "assistant") continue;
    for (const block of contentBlocks(line)) {
      if (block["type"] !== "tool_use" || block["name"] !== "Bash" || !isObj(block["input"])) continue;
      const cmd = block["input"]["command"];
      const id = typeof block["id"] === "string" ? block["id"] : undefined;
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
  const normalized = path.replaceAll("\\", "/");
  return [`.skills/${name}/SKILL.md`, `.claude/skills/${name}/SKILL.md`].some(
    (s) => normalized === s || normalized.endsWith("/" + s),
  );
}

function callsSkill(call: ToolCall, name: string): boolean {
  if (call.name !== "Skill" || !isObj(call.input)) return false;
  const requested = call.input["skill"] ?? call.input["command"];
  if (typeof requested !== "string") return false;
  const skillName = requested.replace(/^\//, "");
  // Plugin skills are named `<plugin>:<skill>`.
  return skillName === name || skillName.endsWith(":" + name);
}

/** The successful call that read the skill, or undefined. */
export function findSkillRead(lines: LinesInput | Fold, name: string): ToolCall | undefined {
  const fold =
    "toolCalls" in lines && lines.toolCalls instanceof Map ? (lines as Fold) : foldMessages(lines as LinesInput);
  for (const call of fold.toolCalls.values()) {
    if (call.result === undefined || call.result.isError) continue;
    if (readsSkillFile(call, name) || callsSkill(call, name)) return call;
  }
  return undefined;
}

/** Throws SkillNotReadError unless the run successfully read the skill `name`. */
export function assertSkillWasRead(lines: LinesInput | Fold, name: string): void {
  if (findSkillRead(lines, name) === undefined) throw new SkillNotReadError(name);
}
