// Trust rule patterns and matching, pure.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  evaluateRules,
  InvalidRuleError,
  parsePattern,
  patternForCall,
  ruleMatches,
  type TrustRule,
} from "../../src/decisions/index.ts";
import { patternForSubject } from "../../src/decisions/rules.ts";

const rule = (pattern: string, effect: "allow" | "deny" = "allow"): TrustRule => ({
  id: pattern,
  pattern,
  effect,
  by: "t",
  at: "2026-01-01T00:00:00Z",
});
const bash = (command: string) => ({ tool: "Bash", input: { command } });

test("patterns: Tool and Tool(specifier); Tool(*) is Tool, mcp__server__* is mcp__server; bad ones name the fix", () => {
  assert.deepEqual(parsePattern("Bash(git status*)"), { tool: "Bash", glob: "git status*" });
  assert.deepEqual(parsePattern("WebFetch"), { tool: "WebFetch", glob: undefined });
  assert.deepEqual(parsePattern("Bash(*)"), { tool: "Bash", glob: undefined });
  assert.deepEqual(parsePattern("mcp__github__*"), { tool: "mcp__github", glob: undefined });
  assert.deepEqual(parsePattern("mcp__github__get_issue"), { tool: "mcp__github__get_issue", glob: undefined });
  assert.throws(() => parsePattern("Bash__*"), InvalidRuleError, "only an MCP server takes __*");
  assert.throws(() => parsePattern("Bash("), InvalidRuleError);
  assert.throws(() => parsePattern("Bash()"), /must not be empty/);
  assert.throws(() => parsePattern("(x)"), /Tool\(specifier\)/);
});

test("Bash allow patterns need every part of a compound command; substitutions and redirections never ride on a wildcard", () => {
  const gitStatus = rule("Bash(git status*)");
  assert.equal(ruleMatches(gitStatus, bash("git status")), true);
  assert.equal(ruleMatches(gitStatus, bash("git status --short")), true);
  assert.equal(ruleMatches(gitStatus, bash("git statusx; rm -rf /")), false);
  assert.equal(ruleMatches(gitStatus, bash("git status && curl evil")), false);
  assert.equal(ruleMatches(gitStatus, bash("git status $(rm -rf /)")), false);
  assert.equal(ruleMatches(gitStatus, bash("git status > /etc/passwd")), false);
  assert.equal(ruleMatches(gitStatus, bash("git push")), false);
  assert.equal(ruleMatches(rule("Bash"), bash("anything; at all")), true, "a bare tool rule is every call");
  assert.equal(
    ruleMatches(rule("Bash(echo a > f)"), bash("echo a > f")),
    true,
    "an exact rule (no wildcard) matches exactly",
  );
  assert.equal(
    ruleMatches(rule("Bash(git *)"), bash("git log && git status | git stash list")),
    true,
    "every part matches",
  );
  assert.equal(ruleMatches(rule("Bash(git *)"), bash(" ; && ")), false, "no parts is not every part allowed");
  assert.equal(ruleMatches(rule("Bash(*)"), bash("anything; at all")), true, "Bash(*) is Bash");
});

test("deny rules also match any simple command inside a compound one, and beat allow rules", () => {
  const rules = [rule("Bash(git *)"), rule("Bash(rm *)", "deny")];
  assert.equal(evaluateRules(rules, bash("git log"))?.effect, "allow");
  assert.equal(evaluateRules(rules, bash("git log; rm -rf x"))?.effect, "deny");
  assert.equal(evaluateRules(rules, bash("echo $(rm -rf x)"))?.effect, "deny");
  assert.equal(evaluateRules(rules, bash("ls")), undefined);
  assert.equal(evaluateRules([rule("Bash"), rule("Bash(rm *)", "deny")], bash("rm -rf x"))?.effect, "deny");
});

test("exact rules from a call escape wildcards and anchor file paths; file rules are relative to the run's cwd", () => {
  const pattern = patternForCall("Bash", { command: "echo * \\ done" });
  assert.equal(pattern, "Bash(echo \\* \\\\ done)");
  assert.equal(ruleMatches(rule(pattern), bash("echo * \\ done")), true);
  assert.equal(ruleMatches(rule(pattern), bash("echo x \\ done")), false);
  const write = (file_path: string) => ({ tool: "Write", input: { file_path }, cwd: "/w" });
  const exact = patternForCall("Write", { file_path: "/w/src/*.ts" });
  assert.equal(exact, "Write(//w/src/\\*.ts)", "absolute paths are written //path");
  assert.equal(ruleMatches(rule(exact), write("/w/src/*.ts")), true);
  assert.equal(ruleMatches(rule(exact), write("/w/src/a.ts")), false);
  assert.equal(
    patternForSubject("Write", "a.ts"),
    "Write(./a.ts)",
    "a relative path is anchored, not matched at any depth",
  );
  assert.equal(ruleMatches(rule(patternForSubject("Write", "a.ts")), write("/w/sub/a.ts")), false);
  const srcWrites = rule("Write(src/*)");
  assert.equal(ruleMatches(srcWrites, write("/w/src/a.ts")), true);
  assert.equal(ruleMatches(srcWrites, write("/elsewhere/src/a.ts")), false);
  assert.equal(ruleMatches(srcWrites, write("/w/src/../../etc/a.ts")), false, "paths are normalized before matching");
  assert.equal(ruleMatches(rule("Write(//etc/*)"), write("/etc/hosts")), true);
  assert.equal(
    ruleMatches(rule("Write(/etc/*)"), write("/etc/hosts")),
    false,
    "a single leading / is the project root",
  );
  assert.equal(ruleMatches(rule("Write(/etc/*)"), write("/w/etc/hosts")), true);
  assert.equal(
    ruleMatches(rule("Write(src/*)"), { tool: "Write", input: { file_path: "/w/src/a.ts" } }),
    false,
    "no cwd: relative rules match nothing",
  );
  assert.equal(ruleMatches(rule("Write"), { tool: "TodoWrite", input: {} }), false);
  assert.equal(
    ruleMatches(rule("WebFetch(https://docs.example/*)"), {
      tool: "WebFetch",
      input: { url: "https://docs.example/a" },
    }),
    true,
  );
});

test("deny before allow, whatever the order or how specific the allow is", () => {
  const rules = [rule("Bash(aws s3 ls)"), rule("Bash(aws *)", "deny")];
  assert.equal(evaluateRules(rules, bash("aws s3 ls"))?.effect, "deny");
  assert.equal(
    evaluateRules([rule("Edit(src/**)"), rule("Edit(src/secret/**)", "deny")], {
      tool: "Write",
      input: { file_path: "/w/src/secret/k" },
      cwd: "/w",
    })?.effect,
    "deny",
  );
  assert.equal(
    evaluateRules([rule("Edit(src/**)"), rule("Edit(src/secret/**)", "deny")], {
      tool: "Write",
      input: { file_path: "/w/src/a" },
      cwd: "/w",
    })?.effect,
    "allow",
  );
});
