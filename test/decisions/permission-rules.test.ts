// Trust rules speak Claude Code's permission-rule syntax: one row per example from its documentation
// (https://code.claude.com/docs/en/permissions), plus the two bugs of the old glob matcher.
import { test } from "node:test";
import assert from "node:assert/strict";
import { evaluateRules, ruleMatches, type RuleEffect, type TrustRule } from "../../src/decisions/index.ts";

const CWD = "/work/app";
const HOME = "/home/alice";

interface Row {
  rule: string;
  tool: string;
  input: Record<string, unknown>;
  match: boolean;
  /** Default allow; deny rows check what a deny rule catches inside compound commands. */
  effect?: RuleEffect;
}

const bash = (rule: string, command: string, match: boolean, effect?: RuleEffect): Row => ({
  rule,
  tool: "Bash",
  input: { command },
  match,
  effect,
});
const file = (rule: string, tool: string, path: string, match: boolean): Row => ({
  rule,
  tool,
  input: tool === "NotebookEdit" ? { notebook_path: path } : { file_path: path },
  match,
});
const fetch = (rule: string, url: string, match: boolean): Row => ({ rule, tool: "WebFetch", input: { url }, match });
const mcp = (rule: string, tool: string, match: boolean): Row => ({ rule, tool, input: {}, match });

const TABLE: Row[] = [
  // `Tool` alone: every use; `Bash(*)` is the same as `Bash`.
  bash("Bash", "npm run build", true),
  bash("Bash", "rm -rf build && ls", true),
  bash("Bash(*)", "rm -rf build && ls", true),
  fetch("WebFetch", "https://anything.example/x", true),
  file("Read", "Read", "/etc/passwd", true),
  file("Bash", "Write", `${CWD}/a.ts`, false),

  // Exact commands.
  bash("Bash(npm run build)", "npm run build", true),
  bash("Bash(npm run build)", "npm run build --watch", false),
  bash("Bash(npm run build)", "npm run build:dev", false),

  // Legacy `:*` prefix: a word boundary after the prefix (bug 1: `git status:*` never matched `git status`).
  bash("Bash(npm run test:*)", "npm run test", true),
  bash("Bash(npm run test:*)", "npm run test -- --watch", true),
  bash("Bash(npm run test:*)", "npm run testing", false),
  bash("Bash(git status:*)", "git status", true),
  bash("Bash(git status:*)", "git status --short", true),
  bash("Bash(git status:*)", "git statusx", false),
  bash("Bash(ls:*)", "ls -la", true),
  bash("Bash(ls:*)", "ls", true),
  bash("Bash(ls:*)", "lsof", false),

  // `*` wildcards anywhere; a space before `*` keeps a word boundary, and a lone trailing ` *` may match nothing.
  bash("Bash(ls *)", "ls -la", true),
  bash("Bash(ls *)", "ls", true),
  bash("Bash(ls *)", "lsof", false),
  bash("Bash(ls*)", "lsof", true),
  bash("Bash(ls*)", "ls -la", true),
  bash("Bash(npm run *)", "npm run lint", true),
  bash("Bash(git * main)", "git checkout main", true),
  bash("Bash(git * main)", "git merge main", true),
  bash("Bash(git * main)", "git checkout dev", false),
  bash("Bash(* --version)", "node --version", true),
  bash("Bash(* --version)", "node --help", false),
  bash("Bash(* install)", "npm install", true),
  bash("Bash(touch *)", "touch a.txt", true),
  bash("Bash(git diff *)", "git diff HEAD~1 -- src", true),
  bash("Bash(git diff *)", "git diffx", false),

  // Compound commands are split: every part must match an allow; any part matches a deny.
  bash("Bash(safe-cmd:*)", "safe-cmd && other-cmd", false),
  bash("Bash(safe-cmd *)", "safe-cmd; other-cmd", false),
  bash("Bash(safe-cmd *)", "safe-cmd -a || safe-cmd -b", true),
  bash("Bash(safe-cmd *)", "safe-cmd -a | safe-cmd -b", true),
  bash("Bash(safe-cmd *)", "safe-cmd $(other-cmd)", false),
  bash("Bash(safe-cmd *)", "safe-cmd > /etc/passwd", false),
  bash("Bash(rm *)", "ls && rm -rf build", true, "deny"),
  bash("Bash(rm:*)", "echo $(rm -rf build)", true, "deny"),
  bash("Bash(rm *)", "ls -la", false, "deny"),

  // Read/Edit paths, gitignore style: `//` filesystem root, `~/` home, `/` project root (the run's cwd), else the cwd.
  file("Read(//Users/alice/secrets/**)", "Read", "/Users/alice/secrets/a/b.txt", true),
  file("Read(//Users/alice/secrets/**)", "Read", "/Users/bob/secrets/b.txt", false),
  file("Read(~/Documents/*.pdf)", "Read", `${HOME}/Documents/cv.pdf`, true),
  file("Read(~/Documents/*.pdf)", "Read", `${HOME}/Documents/old/cv.pdf`, false),
  file("Edit(/src/**/*.ts)", "Edit", `${CWD}/src/a/b.ts`, true),
  file("Edit(/src/**/*.ts)", "Edit", "/src/a/b.ts", false),
  file("Read(*.env)", "Read", `${CWD}/.env`, true),
  file("Read(*.env)", "Read", `${CWD}/config/prod.env`, true),
  file("Read(*.env)", "Read", "/elsewhere/.env", false),
  file("Read(./.env)", "Read", `${CWD}/.env`, true),
  file("Read(./.env)", "Read", `${CWD}/config/.env`, false),
  file("Edit(docs/**)", "Edit", `${CWD}/docs/a/b.md`, true),
  file("Edit(docs)", "Edit", `${CWD}/docs/a.md`, true),
  file("Edit(docs/)", "Edit", `${CWD}/docs/a.md`, true),
  // `*` stays inside one segment, `**` crosses directories (bug 2: `*` used to cross `/`).
  file("Edit(src/*.ts)", "Edit", `${CWD}/src/a.ts`, true),
  file("Edit(src/*.ts)", "Edit", `${CWD}/src/sub/a.ts`, false),
  file("Edit(src/**/*.ts)", "Edit", `${CWD}/src/a.ts`, true),
  file("Edit(src/**/*.ts)", "Edit", `${CWD}/src/sub/a.ts`, true),
  file("Edit(src/**/*.ts)", "Edit", `${CWD}/src/sub/a.js`, false),
  // `Edit` rules cover every built-in file-editing tool.
  file("Edit(src/**/*.ts)", "Write", `${CWD}/src/sub/a.ts`, true),
  file("Edit(src/**/*.ts)", "MultiEdit", `${CWD}/src/sub/a.ts`, true),
  file("Edit(*.ipynb)", "NotebookEdit", `${CWD}/nb/a.ipynb`, true),
  file("Edit", "Write", `${CWD}/any`, true),
  file("Edit(src/**)", "Read", `${CWD}/src/a.ts`, false),

  // WebFetch by domain: that host exactly (the docs do not say subdomains match).
  fetch("WebFetch(domain:example.com)", "https://example.com/docs?q=1", true),
  fetch("WebFetch(domain:example.com)", "http://EXAMPLE.com:8080/", true),
  fetch("WebFetch(domain:example.com)", "https://docs.example.com/", false),
  fetch("WebFetch(domain:example.com)", "https://example.com.evil.io/", false),
  fetch("WebFetch(domain:example.com)", "not a url", false),

  // MCP: a server's every tool, or one tool.
  mcp("mcp__puppeteer", "mcp__puppeteer__puppeteer_navigate", true),
  mcp("mcp__puppeteer__*", "mcp__puppeteer__puppeteer_navigate", true),
  mcp("mcp__puppeteer__puppeteer_navigate", "mcp__puppeteer__puppeteer_navigate", true),
  mcp("mcp__puppeteer__puppeteer_navigate", "mcp__puppeteer__puppeteer_click", false),
  mcp("mcp__puppeteer", "mcp__puppeteer2__navigate", false),
];

const ruleOf = (pattern: string, effect: RuleEffect): TrustRule => ({
  id: pattern,
  pattern,
  effect,
  by: "t",
  at: "2026-01-01T00:00:00Z",
});

test(`the documentation's examples: ${TABLE.length} rows of rule, tool, input → match`, () => {
  const wrong = TABLE.filter((row) => {
    const got = ruleMatches(ruleOf(row.rule, row.effect ?? "allow"), {
      tool: row.tool,
      input: row.input,
      cwd: CWD,
      home: HOME,
    });
    return got !== row.match;
  }).map(
    (row) => `${row.effect ?? "allow"} ${row.rule} on ${row.tool} ${JSON.stringify(row.input)}: expected ${row.match}`,
  );
  assert.deepEqual(wrong, []);
});

test("order is deny, then allow; specificity does not matter", () => {
  const call = { tool: "Bash", input: { command: "aws s3 ls" }, cwd: CWD, home: HOME };
  assert.equal(
    evaluateRules([ruleOf("Bash(aws s3 ls)", "allow"), ruleOf("Bash(aws *)", "deny")], call)?.effect,
    "deny",
  );
  assert.equal(
    evaluateRules([ruleOf("Bash(aws *)", "deny"), ruleOf("Bash(aws s3 ls)", "allow")], call)?.effect,
    "deny",
  );
  assert.equal(evaluateRules([ruleOf("Bash(aws s3 ls)", "allow")], call)?.effect, "allow");
  assert.equal(evaluateRules([ruleOf("Bash(aws ec2 *)", "deny")], call), undefined, "no match: an operator is asked");
});
