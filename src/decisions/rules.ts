// Trust rules: `Tool` or `Tool(glob)` with an effect (allow | deny). The glob is matched against the
// tool call's subject (Bash: the command; file tools: the path; WebFetch: the URL); `*` matches any
// run of characters, `\*` and `\\` are literal. Deny beats allow. Rules live in one fleet-wide Redis
// hash; the `rule.added` event in the deciding session's log is the record of who added it and why.
// Anyone who can write Redis can write that hash, so a rule counts only when signed by an operator key
// the hub trusts (signing.ts); the store keeps whatever is there and the hub checks each rule.
import { createHash } from "node:crypto";
import { isAbsolute, relative } from "node:path";
import { z } from "zod";
import type { RedisClient } from "../log/index.ts";
import { InvalidRuleError } from "./errors.ts";
import { SHELL_TOOLS } from "./tool-calls.ts";

export const ruleEffectSchema = z.enum(["allow", "deny"]);
export type RuleEffect = z.infer<typeof ruleEffectSchema>;

export const ruleSchema = z.object({
  id: z.string().min(1),
  pattern: z.string().min(1),
  effect: ruleEffectSchema,
  by: z.string().min(1),
  at: z.string().min(1),
  reason: z.string().optional(),
  /** The decision that created the rule (`--always`). */
  source: z.object({ session: z.string(), requestId: z.string() }).optional(),
  /** The operator key that signed the rule and its Ed25519 signature (signing.ts). */
  keyId: z.string().optional(),
  signature: z.string().optional(),
});
export type TrustRule = z.infer<typeof ruleSchema>;

export interface ParsedPattern {
  tool: string;
  /** undefined: every call of the tool. */
  glob: string | undefined;
}

const PATTERN = /^([A-Za-z][A-Za-z0-9_-]*)(?:\(([\s\S]*)\))?$/;

export function parsePattern(pattern: string): ParsedPattern {
  const m = PATTERN.exec(pattern.trim());
  if (m === null) throw new InvalidRuleError(pattern, 'write a rule as "Tool" or "Tool(glob)", e.g. Bash(git status*)');
  const glob = m[2];
  if (glob !== undefined && glob.length === 0) throw new InvalidRuleError(pattern, "the glob in Tool(...) must not be empty; use just the tool name to match every call");
  return { tool: m[1]!, glob };
}

/** Escapes text so that it matches itself only, as the glob of a rule. */
export function escapeGlob(text: string): string {
  return text.replace(/[\\*]/g, (c) => `\\${c}`);
}

function globRegex(glob: string): RegExp {
  let src = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === "\\" && i + 1 < glob.length) src += glob[++i]!.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
    else if (c === "*") src += "[\\s\\S]*";
    else src += c.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  }
  return new RegExp(`^${src}$`);
}

const hasWildcard = (glob: string): boolean => /(^|[^\\])(\\\\)*\*/.test(glob);

const websocketUrl = (input: Record<string, unknown>): string | undefined => {
  const url = (input["ws"] as { url?: unknown } | undefined)?.url;
  return typeof url === "string" ? url : undefined;
};

/** The part of a tool call a rule's glob is matched against; undefined when the tool has none. */
export function subjectOf(tool: string, input: Record<string, unknown>): string | undefined {
  const s = (k: string): string | undefined => (typeof input[k] === "string" ? (input[k] as string) : undefined);
  switch (tool) {
    case "Bash":
      return s("command");
    case "Monitor":
      return s("command") ?? websocketUrl(input);
    case "Write":
    case "Edit":
    case "MultiEdit":
      return s("file_path");
    case "NotebookEdit":
      return s("notebook_path");
    case "WebFetch":
      return s("url");
    default:
      return undefined;
  }
}

const FILE_TOOLS = new Set(["Write", "Edit", "MultiEdit", "NotebookEdit"]);
/** Tools whose rules can name a subject (command, path, URL). */
export const SUBJECT_TOOLS: ReadonlySet<string> = new Set(["Bash", "Monitor", "WebFetch", ...FILE_TOOLS]);
// Anything that lets one Bash command line run more than the command it starts with.
const SHELL_CONTROL = /[;&|<>`$\n\r(){}]/;

/** Simple commands of a command line, split on control operators and substitutions (for deny rules). */
function segments(command: string): string[] {
  return command
    .split(/\|\||&&|[;&|\n\r]|\$\(|`|\(|\)/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

export interface CallContext {
  tool: string;
  input: Record<string, unknown>;
  /** The run's working directory: relative file globs are matched against paths relative to it. */
  cwd?: string | undefined;
}

/**
 * Whether one rule applies to a call, matched against the call's raw input (never a scrubbed copy: a
 * scrubbed-away `$(…)` must not make a compound command look simple). A shell allow rule with a
 * wildcard never matches a compound command.
 */
export function ruleMatches(rule: Pick<TrustRule, "pattern" | "effect">, call: CallContext): boolean {
  let p: ParsedPattern;
  try {
    p = parsePattern(rule.pattern);
  } catch {
    return false;
  }
  if (p.tool !== call.tool) return false;
  if (p.glob === undefined) return true;
  const subject = subjectOf(call.tool, call.input);
  if (subject === undefined) return false;
  const re = globRegex(p.glob);
  if (SHELL_TOOLS.has(call.tool)) {
    if (rule.effect === "deny") return re.test(subject.trim()) || segments(subject).some((s) => re.test(s));
    if (hasWildcard(p.glob) && SHELL_CONTROL.test(subject)) return false;
    return re.test(subject.trim());
  }
  if (FILE_TOOLS.has(call.tool) && !isAbsolute(p.glob) && call.cwd !== undefined && isAbsolute(subject)) {
    const rel = relative(call.cwd, subject);
    if (rel.startsWith("..") || isAbsolute(rel)) return false;
    return re.test(rel);
  }
  return re.test(subject);
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
  return subject === undefined ? tool : `${tool}(${escapeGlob(subject)})`;
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
    for (const v of Object.values(all)) {
      try {
        const r = ruleSchema.safeParse(JSON.parse(v));
        if (r.success) out.push(r.data);
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
      throw new InvalidRuleError(rule.pattern, "it is not signed; sign it with signRule and an operator key (the hub ignores unsigned rules)");
    }
    await this.redis.hset(this.key, rule.id, JSON.stringify(ruleSchema.parse(rule)));
  }

  async remove(id: string): Promise<boolean> {
    return (await this.redis.hdel(this.key, id)) > 0;
  }
}
