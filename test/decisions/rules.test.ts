// Trust rule patterns and matching, pure.
import { test } from "node:test";
import assert from "node:assert/strict";
import { evaluateRules, InvalidRuleError, parsePattern, patternForCall, ruleMatches, type TrustRule } from "../../src/decisions/index.ts";

const rule = (pattern: string, effect: "allow" | "deny" = "allow"): TrustRule => ({ id: pattern, pattern, effect, by: "t", at: "2026-01-01T00:00:00Z" });
const bash = (command: string) => ({ tool: "Bash", input: { command } });

test("patterns: Tool and Tool(glob); bad ones name the fix", () => {
  assert.deepEqual(parsePattern("Bash(git status*)"), { tool: "Bash", glob: "git status*" });
  assert.deepEqual(parsePattern("WebFetch"), { tool: "WebFetch", glob: undefined });
  assert.throws(() => parsePattern("Bash("), InvalidRuleError);
  assert.throws(() => parsePattern("Bash()"), /must not be empty/);
  assert.throws(() => parsePattern("(x)"), /Tool\(glob\)/);
});

test("Bash allow globs match whole simple commands only; compound commands never ride on a wildcard", () => {
  const r = rule("Bash(git status*)");
  assert.equal(ruleMatches(r, bash("git status")), true);
  assert.equal(ruleMatches(r, bash("git status --short")), true);
  assert.equal(ruleMatches(r, bash("git statusx; rm -rf /")), false);
  assert.equal(ruleMatches(r, bash("git status && curl evil")), false);
  assert.equal(ruleMatches(r, bash("git status $(rm -rf /)")), false);
  assert.equal(ruleMatches(r, bash("git status > /etc/passwd")), false);
  assert.equal(ruleMatches(r, bash("git push")), false);
  assert.equal(ruleMatches(rule("Bash"), bash("anything; at all")), true, "a bare tool rule is every call");
  assert.equal(ruleMatches(rule("Bash(echo a > f)"), bash("echo a > f")), true, "an exact rule (no wildcard) matches exactly");
});

test("deny rules also match any simple command inside a compound one, and beat allow rules", () => {
  const rules = [rule("Bash(git *)"), rule("Bash(rm *)", "deny")];
  assert.equal(evaluateRules(rules, bash("git log"))?.effect, "allow");
  assert.equal(evaluateRules(rules, bash("git log; rm -rf x"))?.effect, "deny");
  assert.equal(evaluateRules(rules, bash("echo $(rm -rf x)"))?.effect, "deny");
  assert.equal(evaluateRules(rules, bash("ls")), undefined);
  assert.equal(evaluateRules([rule("Bash"), rule("Bash(rm *)", "deny")], bash("rm -rf x"))?.effect, "deny");
});

test("exact rules from a call escape wildcards; file globs may be relative to the run's cwd", () => {
  const p = patternForCall("Bash", { command: "echo * \\ done" });
  assert.equal(p, "Bash(echo \\* \\\\ done)");
  assert.equal(ruleMatches(rule(p), bash("echo * \\ done")), true);
  assert.equal(ruleMatches(rule(p), bash("echo x \\ done")), false);
  const w = rule("Write(src/*)");
  assert.equal(ruleMatches(w, { tool: "Write", input: { file_path: "/w/src/a.ts" }, cwd: "/w" }), true);
  assert.equal(ruleMatches(w, { tool: "Write", input: { file_path: "/elsewhere/src/a.ts" }, cwd: "/w" }), false);
  assert.equal(ruleMatches(rule("Write(/etc/*)"), { tool: "Write", input: { file_path: "/etc/hosts" }, cwd: "/w" }), true);
  assert.equal(ruleMatches(rule("Write"), { tool: "TodoWrite", input: {} }), false);
  assert.equal(ruleMatches(rule("WebFetch(https://docs.example/*)"), { tool: "WebFetch", input: { url: "https://docs.example/a" } }), true);
});
