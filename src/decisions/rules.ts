// Trust rules: `Tool` or `Tool(specifier)` with an effect (allow | deny), in Claude Code's own
// permission-rule syntax (permission-rules.ts has the specifiers: shell prefixes and wildcards,
// gitignore paths, `domain:`). Deny rules are looked at before allow rules and the first match decides;
// there is no `ask` effect: a call no rule matches is what an operator is asked about. Rules live in one
// fleet-wide Redis hash; the `rule.added` event in the deciding session's log is the record of who added
// it and why. Anyone who can write Redis can write that hash, so a rule counts only when signed by an
// operator key the hub trusts (signing.ts); the store keeps whatever is there and the hub checks each rule.
import { createHash } from "node:crypto";
import { homedir } from "node:os";
import { z as zod } from "zod";
import type { RedisClient } from "../log/index.ts";
import { InvalidRuleError } from "./errors.ts";
import {
  domainRuleMatches,
  isDomainSpec,
  pathRuleMatches,
  shellRuleMatches,
  urlGlobMatches,
} from "./permission-rules.ts";
import { SHELL_TOOLS } from "./tool-calls.ts";

export const ruleEffectSchema = zod.enum(["allow", "deny"]);
export type RuleEffect = zod.infer<typeof ruleEffectSchema>;

export const ruleSchema = zod.object({
  id: zod.string().min(1),
  pattern: zod.string().min(1),
  effect: ruleEffectSchema,
  by: zod.string().min(1),
  at: zod.string().min(1),
  reason: zod.string().optional(),
  /** The decision that created the rule (`--always`). */
  source: zod.object({ session: zod.string(), requestId: zod.string() }).optional(),
  /** The operator key that signed the rule and its Ed25519 signature (signing.ts). */
  keyId: zod.string().optional(),
  signature: zod.string().optional(),
});
export type TrustRule = zod.infer<typeof ruleSchema>;

export interface ParsedPattern {
  tool: string;
  /** The specifier inside the parentheses; undefined: every call of the tool. */
  glob: string | undefined;
}

// A tool name, or an MCP server's `mcp__server__*` (the docs' other spelling of `mcp__server`).
const PATTERN = /^([A-Za-z][A-Za-z0-9_.-]*?)(__\*)?(?:\(([\s\S]*)\))?$/;

export function parsePattern(pattern: string): ParsedPattern {
  const match = PATTERN.exec(pattern.trim());
  if (match === null || (match[2] !== undefined && !isMcpServer(match[1]!))) {
    throw new InvalidRuleError(
      pattern,
      'write a rule as "Tool" or "Tool(specifier)", e.g. Bash(git status:*), Edit(src/**/*.ts), WebFetch(domain:example.com), mcp__github',
    );
  }
  const glob = match[3];
  if (glob !== undefined && glob.length === 0)
    throw new InvalidRuleError(
      pattern,
      "the specifier in Tool(...) must not be empty; use just the tool name to match every call",
    );
  // `Bash(*)` is `Bash`, as in the docs; taking it as a glob would refuse compound commands `Bash` allows.
  return { tool: match[1]!, glob: glob?.trim() === "*" ? undefined : glob };
}

/** `mcp__server` (no tool part): names every tool of that server. */
const isMcpServer = (name: string): boolean =>
  /^mcp__[A-Za-z0-9_.-]+$/.test(name) && !name.slice("mcp__".length).includes("__");

/** Escapes text so that it matches itself only, as the glob of a rule. */
export function escapeGlob(text: string): string {
  return text.replace(/[\\*]/g, (c) => `\\${c}`);
}

const websocketUrl = (input: Record<string, unknown>): string | undefined => {
  const url = (input["ws"] as { url?: unknown } | undefined)?.url;
  return typeof url === "string" ? url : undefined;
};

/** The part of a tool call a rule's specifier is matched against; undefined when the tool has none. */
export function subjectOf(tool: string, input: Record<string, unknown>): string | undefined {
  const stringField = (k: string): string | undefined =>
    typeof input[k] === "string" ? (input[k] as string) : undefined;
  switch (tool) {
    case "Bash":
      return stringField("command");
    case "Monitor":
      return stringField("command") ?? websocketUrl(input);
    case "Write":
    case "Edit":
    case "MultiEdit":
    case "Read":
      return stringField("file_path");
    case "NotebookEdit":
      return stringField("notebook_path");
    case "WebFetch":
      return stringField("url");
    default:
      return undefined;
  }
}

/** The built-in tools that edit files: an `Edit` rule covers them all (the docs' wording). */
const EDIT_TOOLS: ReadonlySet<string> = new Set(["Write", "Edit", "MultiEdit", "NotebookEdit"]);
const PATH_TOOLS: ReadonlySet<string> = new Set([...EDIT_TOOLS, "Read"]);
/** Tools whose rules can name a subject (command, path, URL). */
export const SUBJECT_TOOLS: ReadonlySet<string> = new Set([...SHELL_TOOLS, "WebFetch", ...PATH_TOOLS]);

export interface CallContext {
  tool: string;
  input: Record<string, unknown>;
  /** The run's working directory: `/path` and relative path rules are anchored there. */
  cwd?: string | undefined;
  /** Home for `~/path` rules (default: this process's home, which the CLI it spawned shares). */
  home?: string | undefined;
}

/** Whether a rule naming `ruleTool` speaks about calls of `callTool`. */
function ruleCoversTool(ruleTool: string, callTool: string): boolean {
  if (ruleTool === callTool) return true;
  if (ruleTool === "Edit") return EDIT_TOOLS.has(callTool);
  return isMcpServer(ruleTool) && callTool.startsWith(`${ruleTool}__`);
}

/** Whether a rule's specifier matches the call's subject, by the kind of subject the tool has. */
function specifierMatches(spec: string, effect: RuleEffect, call: CallContext): boolean {
  const subject = subjectOf(call.tool, call.input);
  if (subject === undefined) return false;
  if (SHELL_TOOLS.has(call.tool)) return shellRuleMatches(spec, subject, effect);
  if (PATH_TOOLS.has(call.tool)) return pathRuleMatches(spec, subject, { cwd: call.cwd, home: call.home ?? homedir() });
  if (call.tool === "WebFetch")
    return isDomainSpec(spec) ? domainRuleMatches(spec, subject) : urlGlobMatches(spec, subject);
  return false;
}

/**
 * Whether one rule applies to a call, matched against the call's raw input (never a scrubbed copy: a
 * scrubbed-away `$(…)` must not make a compound command look simple). A pattern that does not parse
 * matches nothing.
 */
export function ruleMatches(rule: Pick<TrustRule, "pattern" | "effect">, call: CallContext): boolean {
  let parsed: ParsedPattern;
  try {
    parsed = parsePattern(rule.pattern);
  } catch {
    return false;
  }
  if (!ruleCoversTool(parsed.tool, call.tool)) return false;
  return parsed.glob === undefined || specifierMatches(parsed.glob, rule.effect, call);
}

export interface RuleVerdict {
  effect: RuleEffect;
  rule: TrustRule;
}

/** Deny rules first, then allow rules; undefined when no rule applies (an operator must decide). */
export function evaluateRules(rules: readonly TrustRule[], call: CallContext): RuleVerdict | undefined {
  const deny = rules.find((r) => r.effect === "deny" && ruleMatches(r, call));
  if (deny !== undefined) return { effect: "deny", rule: deny };
  const allow = rules.find((r) => r.effect === "allow" && ruleMatches(r, call));
  return allow === undefined ? undefined : { effect: "allow", rule: allow };
}

/** The rule an `always` decision creates when no pattern is given: exactly this call's subject. */
export function patternForCall(tool: string, input: Record<string, unknown>): string {
  const subject = subjectOf(tool, input);
  return subject === undefined ? tool : patternForSubject(tool, subject);
}

/**
 * The rule matching exactly this subject. File paths get an explicit anchor: an absolute one is written
 * `//path`, since a single leading `/` means the project root (`Write(/etc/hosts)` names
 * `<cwd>/etc/hosts`), and a relative one `./path`, since a bare `a.ts` would match `a.ts` at any depth.
 */
export function patternForSubject(tool: string, subject: string): string {
  if (!PATH_TOOLS.has(tool)) return `${tool}(${escapeGlob(subject)})`;
  const anchorText = subject.startsWith("/") ? "/" : subject.startsWith("./") ? "" : "./";
  return `${tool}(${anchorText}${escapeGlob(subject)})`;
}

/** Same effect + pattern → same id, so adding a rule twice stores it once. */
export function ruleId(effect: RuleEffect, pattern: string): string {
  return `rule-${createHash("sha256").update(`${effect}\n${pattern}`).digest("hex").slice(0, 16)}`;
}

export function rulesKey(prefix: string): string {
  return `${prefix}decisions:rules`;
}

export class RuleStore {
  readonly redis: RedisClient;
  readonly key: string;
  constructor(redis: RedisClient, prefix: string) {
    this.redis = redis;
    this.key = rulesKey(prefix);
  }

  async list(): Promise<TrustRule[]> {
    const all = await this.redis.hgetall(this.key);
    const out: TrustRule[] = [];
    for (const stored of Object.values(all)) {
      try {
        const parsed = ruleSchema.safeParse(JSON.parse(stored));
        if (parsed.success) out.push(parsed.data);
      } catch {
        // a corrupt entry never matches anything
      }
    }
    return out.sort((a, b) => a.at.localeCompare(b.at));
  }

  /** Stores a signed rule (signRule); an unsigned one would never count, so it is refused here. */
  async put(rule: TrustRule): Promise<void> {
    parsePattern(rule.pattern);
    if (rule.keyId === undefined || rule.signature === undefined) {
      throw new InvalidRuleError(
        rule.pattern,
        "it is not signed; sign it with signRule and an operator key (the hub ignores unsigned rules)",
      );
    }
    await this.redis.hset(this.key, rule.id, JSON.stringify(ruleSchema.parse(rule)));
  }

  async remove(id: string): Promise<boolean> {
    return (await this.redis.hdel(this.key, id)) > 0;
  }
}
