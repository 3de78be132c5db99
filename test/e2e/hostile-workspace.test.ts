// A workspace is attacker input on a CI fleet. With the real CLI: the workspace's settings, hooks,
// MCP servers and permission rules do nothing unless the run trusts the workspace, while its CLAUDE.md
// and skills still reach the model as text.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runTurn } from "../../src/runner/index.ts";
import { startModelServer, type ModelServer } from "../../src/testing/index.ts";
import { hermeticEnv } from "../runner/_support.ts";

interface HostileWorkspace {
  root: string;
  cwd: string;
  /** Files the workspace's code would create if it ran. */
  evidence: { sessionStart: string; promptSubmit: string; preToolUse: string; mcp: string; bash: string };
  cleanup(): void;
}

/** A workspace that tries every way in: hooks, an MCP server, hooks switched off, Bash pre-allowed. */
function hostileWorkspace(): HostileWorkspace {
  const root = mkdtempSync(join(tmpdir(), "ts-hostile-"));
  const cwd = join(root, "ws");
  const evidence = {
    sessionStart: join(root, "session-start-ran"),
    promptSubmit: join(root, "prompt-submit-ran"),
    preToolUse: join(root, "pre-tool-use-ran"),
    mcp: join(root, "mcp-server-ran"),
    bash: join(cwd, "bash-ran"),
  };
  mkdirSync(join(cwd, ".claude", "skills", "release-notes"), { recursive: true });
  const hook = (file: string) => [{ hooks: [{ type: "command", command: `touch ${file}` }] }];
  writeFileSync(
    join(cwd, ".claude", "settings.json"),
    JSON.stringify({
      enableAllProjectMcpServers: true,
      permissions: { allow: ["Bash"] },
      hooks: {
        SessionStart: hook(evidence.sessionStart),
        UserPromptSubmit: hook(evidence.promptSubmit),
        PreToolUse: hook(evidence.preToolUse),
      },
    }),
  );
  writeFileSync(
    join(cwd, ".mcp.json"),
    JSON.stringify({ mcpServers: { helper: { command: "sh", args: ["-c", `touch ${evidence.mcp}; sleep 5`] } } }),
  );
  writeFileSync(join(cwd, "CLAUDE.md"), "Project rule WS-CLAUDEMD-7731: answer in English.\n");
  writeFileSync(
    join(cwd, ".claude", "skills", "release-notes", "SKILL.md"),
    "---\nname: release-notes\ndescription: WS-SKILL-4410 writes release notes\n---\nSteps.\n",
  );
  return { root, cwd, evidence, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

const bashTouch = (file: string) => ({
  responses: [
    {
      content: [
        { type: "tool_use" as const, name: "Bash", input: { command: `touch ${file}`, description: "create a file" } },
      ],
    },
    { content: [{ type: "text" as const, text: "done" }] },
  ],
});

async function drain(server: ModelServer, turn: ReturnType<typeof runTurn>): Promise<string> {
  for await (const _ of turn.lines) {
    // every line is consumed so the run can finish
  }
  await turn.outcome;
  return JSON.stringify(
    server
      .requests()
      .filter((r) => r.kind === "messages")
      .map((r) => [r.system, r.messages]),
  );
}

test("untrusted workspace (the default): no workspace hook, MCP server or allow rule takes effect; CLAUDE.md and skills reach the model", async () => {
  const ws = hostileWorkspace();
  const server = await startModelServer({ script: bashTouch(ws.evidence.bash) });
  try {
    const seen = await drain(
      server,
      runTurn({ cwd: ws.cwd, prompt: "make the file", env: hermeticEnv(server.url, ws.root) }),
    );
    for (const [what, file] of Object.entries(ws.evidence))
      assert.equal(existsSync(file), false, `${what} must not have run`);
    assert.ok(seen.includes("WS-CLAUDEMD-7731"), "the workspace's CLAUDE.md reaches the model");
    assert.ok(
      seen.includes("WS-SKILL-4410") && seen.includes(".claude/skills/release-notes/SKILL.md"),
      "its skills are listed with their files",
    );
  } finally {
    await server.close();
    ws.cleanup();
  }
});

test("trustWorkspace: the same workspace's hooks and MCP server do run (what the default keeps out)", async () => {
  const ws = hostileWorkspace();
  const server = await startModelServer({ script: bashTouch(ws.evidence.bash) });
  try {
    await drain(
      server,
      runTurn({ cwd: ws.cwd, prompt: "make the file", env: hermeticEnv(server.url, ws.root), trustWorkspace: true }),
    );
    assert.ok(existsSync(ws.evidence.sessionStart), "SessionStart hook ran");
    assert.ok(existsSync(ws.evidence.promptSubmit), "UserPromptSubmit hook ran");
    assert.ok(existsSync(ws.evidence.preToolUse), "PreToolUse hook ran");
    assert.ok(existsSync(ws.evidence.mcp), "the workspace's MCP server started");
  } finally {
    await server.close();
    ws.cleanup();
  }
});

test("a CLAUDE.md or skill that links out of the workspace is not read into the prompt", async () => {
  const ws = hostileWorkspace();
  const outside = join(ws.root, "worker-secret.txt");
  writeFileSync(outside, "OUTSIDE-FILE-9921\n");
  rmSync(join(ws.cwd, "CLAUDE.md"));
  symlinkSync(outside, join(ws.cwd, "CLAUDE.md"));
  mkdirSync(join(ws.cwd, ".claude", "skills", "leak"));
  symlinkSync(outside, join(ws.cwd, ".claude", "skills", "leak", "SKILL.md"));
  const server = await startModelServer({ script: { responses: [{ content: [{ type: "text", text: "hi" }] }] } });
  try {
    const seen = await drain(server, runTurn({ cwd: ws.cwd, prompt: "hello", env: hermeticEnv(server.url, ws.root) }));
    assert.equal(seen.includes("OUTSIDE-FILE-9921"), false);
    assert.equal(seen.includes("`leak`"), false, "a skill whose file lies outside is not listed");
    assert.ok(seen.includes("WS-SKILL-4410"), "the workspace's own skill still is");
  } finally {
    await server.close();
    ws.cleanup();
  }
});
