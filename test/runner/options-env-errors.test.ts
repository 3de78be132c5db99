import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  buildArgs,
  buildEnv,
  modelAccessEnv,
  ClaudeCodeCliError,
  CliNotFoundError,
  LostSessionError,
  resolveClaudeBin,
  runTurn,
  validateRunTurnOptions,
} from "../../src/runner/index.ts";

function kindOf(fn: () => unknown): { kind: string; message: string } {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ClaudeCodeCliError, `expected ClaudeCodeCliError, got ${String(err)}`);
    return { kind: err.kind, message: err.message };
  }
  assert.fail("expected a throw");
}

test("bad options become bad_options naming the field, before anything spawns", () => {
  assert.deepEqual(kindOf(() => runTurn({ cwd: "relative/dir" })).kind, "bad_options");
  assert.match(kindOf(() => runTurn({ cwd: "relative/dir" })).message, /`cwd`/);
  assert.match(kindOf(() => runTurn({ cwd: "/tmp", maxTurns: 0 })).message, /`maxTurns`/);
  assert.match(kindOf(() => runTurn({ cwd: "/tmp", addDirs: ["/ok", "rel"] })).message, /`addDirs\.1`/);
  assert.match(kindOf(() => runTurn({ cwd: "/tmp", resume: "../../etc" })).message, /`resume`/);
  assert.match(kindOf(() => runTurn({ cwd: "/tmp", bogus: 1 } as never)).message, /`bogus`.*unknown option/);
  assert.match(
    kindOf(() => runTurn({ cwd: "/tmp", skills: [{ name: "../x", path: "/a" }] })).message,
    /`skills\.0\.name`/,
  );
});

test("skipPermissions as root without sandboxed is refused before spawning, saying why", () => {
  const thrown = kindOf(() => runTurn({ cwd: "/tmp", skipPermissions: true, claudeBin: "/nonexistent/claude" }));
  // Not root: no refusal, so the next check (the binary) fails instead.
  assert.equal(thrown.kind, process.getuid?.() === 0 ? "bad_options" : "cli_not_found");
  if (thrown.kind !== "bad_options") return;
  assert.match(thrown.message, /IS_SANDBOX=1/);
  assert.match(thrown.message, /sandboxed: true/);
});

test("args: fixed stream-json prefix, one flag per option, prompt never in argv", () => {
  const validated = validateRunTurnOptions({
    cwd: "/w",
    prompt: "SECRET PROMPT",
    model: "m",
    resume: "abc-123",
    forkSession: true,
    permissionMode: "plan",
    addDirs: ["/a", "/b"],
    maxTurns: 3,
    maxBudgetUsd: 0.5,
    allowedTools: ["Read", "Bash(git:*)"],
    disallowedTools: ["Write"],
    includePartialMessages: true,
    includeHookEvents: true,
    settingsFile: "/s.json",
    extraArgs: ["--effort", "low"],
  });
  const args = buildArgs(validated);
  assert.deepEqual(args.slice(0, 4), ["-p", "--output-format", "stream-json", "--verbose"]);
  assert.ok(!args.some((a) => a.includes("SECRET")));
  for (const want of [
    ["--model", "m"],
    ["--resume", "abc-123"],
    ["--permission-mode", "plan"],
    ["--max-turns", "3"],
    ["--max-budget-usd", "0.5"],
    ["--settings", "/s.json"],
  ]) {
    const flagIndex = args.indexOf(want[0]!);
    assert.ok(flagIndex > 0, want[0]);
    assert.equal(args[flagIndex + 1], want[1]);
  }
  for (const flag of [
    "--fork-session",
    "--add-dir=/a",
    "--add-dir=/b",
    "--allowed-tools=Read,Bash(git:*)",
    "--disallowed-tools=Write",
    "--include-partial-messages",
    "--include-hook-events",
  ]) {
    assert.ok(args.includes(flag), flag);
  }
  assert.deepEqual(args.slice(-2), ["--effort", "low"]);
});

test("env: a minimal base of the host, its model access and CLI settings, overlay on top (undefined removes), FORCE_COLOR=0 last", () => {
  const host = {
    PATH: "/bin",
    HOME: "/h",
    LANG: "C.UTF-8",
    LC_TIME: "C",
    TZ: "UTC",
    ANTHROPIC_API_KEY: "host-key",
    CLAUDE_CONFIG_DIR: "/host/cfg",
    CLAUDE_CODE_MAX_RETRIES: "0",
    HTTPS_PROXY: "http://proxy",
    AWS_SECRET_ACCESS_KEY: "aws",
    REDIS_URL: "redis://:pw@r",
    KEEP: "1",
    FORCE_COLOR: "3",
  };
  const childEnv = buildEnv({ host, overlay: { HOME: undefined, NEW: "n", FORCE_COLOR: "1" } });
  assert.deepEqual(Object.keys(childEnv).sort(), [
    "ANTHROPIC_API_KEY",
    "CLAUDE_CODE_MAX_RETRIES",
    "CLAUDE_CONFIG_DIR",
    "FORCE_COLOR",
    "HTTPS_PROXY",
    "LANG",
    "LC_TIME",
    "NEW",
    "PATH",
    "TZ",
  ]);
  assert.equal(childEnv["FORCE_COLOR"], "0");
  assert.equal(childEnv["ANTHROPIC_API_KEY"], "host-key");
  // A cloud provider's credentials only where the host points the CLI at it.
  assert.equal(buildEnv({ host: { ...host, CLAUDE_CODE_USE_BEDROCK: "1" } })["AWS_SECRET_ACCESS_KEY"], "aws");
  const iso = buildEnv({ host, overlay: { ANTHROPIC_BASE_URL: "http://x" }, isolate: true });
  assert.deepEqual(Object.keys(iso).sort(), [
    "ANTHROPIC_BASE_URL",
    "FORCE_COLOR",
    "HOME",
    "LANG",
    "LC_TIME",
    "PATH",
    "TZ",
  ]);
  assert.deepEqual(modelAccessEnv(host), { ANTHROPIC_API_KEY: "host-key", HTTPS_PROXY: "http://proxy" });
});

test("binary resolution: option, then the host's CLAUDE_BIN, then the pinned package; not found names both knobs", () => {
  const dir = mkdtempSync(join(tmpdir(), "ts-bin-"));
  const fake = join(dir, "claude");
  writeFileSync(fake, "#!/bin/sh\necho 1\n");
  chmodSync(fake, 0o755);
  assert.equal(resolveClaudeBin({ claudeBin: fake, env: { CLAUDE_BIN: "/nope" } }), fake);
  assert.equal(resolveClaudeBin({ env: { CLAUDE_BIN: fake } }), fake);
  assert.match(resolveClaudeBin({ env: { PATH: "" } }), /@anthropic-ai\/claude-code\/bin\/claude(\.exe)?$/);
  for (const fn of [
    () => resolveClaudeBin({ claudeBin: join(dir, "missing") }),
    () => resolveClaudeBin({ env: { CLAUDE_BIN: join(dir, "missing") } }),
  ]) {
    assert.throws(fn, (err: unknown) => {
      assert.ok(err instanceof CliNotFoundError);
      assert.equal(err.kind, "cli_not_found");
      assert.match(err.message, /claudeBin/);
      assert.match(err.message, /CLAUDE_BIN/);
      return true;
    });
  }
  // Through runTurn: the same error, before spawning.
  assert.equal(kindOf(() => runTurn({ cwd: dir, claudeBin: join(dir, "missing") })).kind, "cli_not_found");
});

test("errors: stderr kept but not enumerable and not in the message; structured fields readonly", () => {
  const cliError = new ClaudeCodeCliError("the claude CLI reported auth", {
    kind: "auth",
    exitCode: 1,
    stderr: "token sk-ant-xyz leaked",
    apiErrorStatus: 401,
    errors: ["x"],
  });
  assert.equal(cliError.stderr, "token sk-ant-xyz leaked");
  assert.equal(Object.keys(cliError).includes("stderr"), false);
  assert.equal(JSON.stringify(cliError).includes("sk-ant"), false);
  assert.equal(cliError.message.includes("sk-ant"), false);
  assert.equal(cliError.retryable, false);
  assert.equal(new ClaudeCodeCliError("t", { kind: "timeout" }).retryable, true);
  const lost = new LostSessionError("sess-1", "thread-9", { exitCode: 1, cause: new Error("c") });
  assert.ok(lost instanceof ClaudeCodeCliError);
  assert.equal(lost.kind, "lost_session");
  assert.equal(lost.sessionId, "sess-1");
  assert.equal(lost.threadId, "thread-9");
  assert.ok(lost.cause instanceof Error);
});
