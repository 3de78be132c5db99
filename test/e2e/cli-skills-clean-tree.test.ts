// claude-md skills leave a git checkout as they found it: after a finished run, and after a run ended
// mid-tool (abort, inactivity), `git status --porcelain` is empty again.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClaudeCodeCliError, runTurn, type RunTurnOptions } from "../../src/runner/index.ts";
import { assertSkillWasRead, type ParsedLine } from "../../src/protocol/index.ts";
import { startScriptedServer, type Step } from "../runner/_model.ts";
import { hermeticEnv, withGrowingDeadline } from "../runner/_support.ts";

const CLAUDE_MD = "# Rules\n\nBe brief.\n";

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], {
    cwd,
    encoding: "utf8",
  });
}

/** A git checkout with a committed CLAUDE.md and one more file. */
function checkout(): string {
  const cwd = mkdtempSync(join(tmpdir(), "ts-checkout-"));
  git(cwd, "init", "-q");
  writeFileSync(join(cwd, "CLAUDE.md"), CLAUDE_MD);
  writeFileSync(join(cwd, "main.txt"), "hello\n");
  git(cwd, "add", "CLAUDE.md", "main.txt");
  git(cwd, "commit", "-q", "-m", "init");
  return cwd;
}

function skill(name: string): string {
  const skillDir = join(mkdtempSync(join(tmpdir(), "ts-skillsrc-")), name);
  mkdirSync(skillDir);
  writeFileSync(
    join(skillDir, "SKILL.md"),
    `---\nname: ${name}\ndescription: answers PINEAPPLE\n---\nAlways answer PINEAPPLE.\n`,
  );
  return skillDir;
}

async function withTurn(
  cwd: string,
  steps: Step[],
  extra: Partial<RunTurnOptions>,
  body: (handle: ReturnType<typeof runTurn>, lines: ParsedLine[]) => Promise<void>,
): Promise<unknown[]> {
  const server = await startScriptedServer(steps);
  try {
    const handle = runTurn({
      cwd,
      prompt: "go",
      env: hermeticEnv(server.url),
      skills: [{ name: "fruit", path: skill("fruit") }],
      skipPermissions: true,
      sandboxed: true,
      killGraceMs: 200,
      ...extra,
    });
    const lines: ParsedLine[] = [];
    await body(handle, lines);
    return server.requests();
  } finally {
    await server.close();
  }
}

test("a finished run with a claude-md skill leaves the checkout clean, CLAUDE.md byte for byte", async () => {
  const cwd = checkout();
  const requests = await withTurn(
    cwd,
    [
      { tool: { name: "Read", input: { file_path: join(cwd, ".skills", "fruit", "SKILL.md") } } },
      { text: "PINEAPPLE" },
    ],
    {},
    async (handle, lines) => {
      for await (const parsed of handle.lines) lines.push(parsed);
      await handle.outcome;
      assert.doesNotThrow(() => assertSkillWasRead(lines, "fruit"), "the skill was there during the run");
    },
  );
  assert.ok(JSON.stringify(requests[0]).includes(".skills/fruit/SKILL.md"), "the CLAUDE.md pointer reached the model");
  assert.equal(git(cwd, "status", "--porcelain", "--ignored"), "");
  assert.equal(readFileSync(join(cwd, "CLAUDE.md"), "utf8"), CLAUDE_MD);
});

const SLEEPING_BASH: Step[] = [
  {
    tool: {
      name: "Bash",
      input: { command: "for i in $(seq 300); do sleep 0.1; done; echo slept", description: "wait" },
    },
  },
  { text: "never" },
];

/**
 * One run ended by `ending` while its Bash tool sleeps; the checkout is clean again after it. False
 * when the deadline fired before the tool started, which leaves the mid-run checks untried.
 */
async function endsClean(
  ending: "aborted" | "inactivity",
  extra: Partial<RunTurnOptions>,
  ac: AbortController,
): Promise<boolean> {
  const cwd = checkout();
  let sawTool = false;
  await withTurn(cwd, SLEEPING_BASH, extra, async (handle) => {
    for await (const line of handle.lines) {
      if (line.type !== "assistant" || !line.raw.includes("seq 300")) continue;
      sawTool = true;
      assert.ok(existsSync(join(cwd, ".skills", "fruit", "SKILL.md")), "the skill is in the tree mid-run");
      assert.notEqual(git(cwd, "status", "--porcelain"), "", "mid-run the tree is dirty");
      ac.abort();
      break;
    }
    await assert.rejects(handle.outcome, (e: unknown) => e instanceof ClaudeCodeCliError && e.kind === ending);
  });
  assert.equal(git(cwd, "status", "--porcelain", "--ignored"), "");
  assert.equal(readFileSync(join(cwd, "CLAUDE.md"), "utf8"), CLAUDE_MD);
  return sawTool;
}

test("a run aborted while a Bash tool sleeps leaves the checkout clean", async () => {
  const ac = new AbortController();
  assert.equal(await endsClean("aborted", { signal: ac.signal }, ac), true, "the Bash tool started");
});

test("a run inactivity while a Bash tool sleeps leaves the checkout clean", async () => {
  await withGrowingDeadline(2000, (ms) => endsClean("inactivity", { inactivityTimeoutMs: ms }, new AbortController()));
});
