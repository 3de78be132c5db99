// runTurn's toolSandbox with the real CLI: the caller's settings (here a PreToolUse hook) and the
// sandbox block become one --settings file; the hook runs outside the sandbox (as the supervised
// forwarder must, to reach its loopback hub) while the Bash command it lets through is confined.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { runTurn } from "../../src/runner/index.ts";
import { CONFIG_HOME_ENTRIES, runSettings, SOCKET_DIR_MAX, type RunFilesAccess } from "../../src/runner/sandbox.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { hermeticEnv } from "./_support.ts";

test("toolSandbox: the caller's hook and the sandbox share one settings file; the hook runs unconfined, the tool does not", async () => {
  const root = mkdtempSync(join(tmpdir(), "ts-sbx-cli-"));
  const cwd = join(root, "ws");
  mkdirSync(cwd);
  const hookMark = join(root, "hook-ran-outside");
  const toolMark = join(root, "tool-wrote-outside");
  const settingsFile = join(root, "caller-settings.json");
  const hook = { matcher: "Bash", hooks: [{ type: "command", command: `touch ${hookMark}` }] };
  writeFileSync(settingsFile, JSON.stringify({ hooks: { PreToolUse: [hook] } }));
  writeFileSync(join(root, "secret.txt"), "PARENT-SECRET-3390");
  writeFileSync(join(cwd, "notes.txt"), "WORKSPACE-NOTES-1177");
  const server = await startModelServer({
    script: {
      responses: [
        {
          content: [
            {
              type: "tool_use",
              name: "Bash",
              input: {
                command: `echo x > ${toolMark}; echo TMP=$TMPDIR; cat ${join(root, "secret.txt")}; cat notes.txt`,
                description: "probe",
              },
            },
          ],
        },
        { content: [{ type: "text", text: "done" }] },
      ],
    },
  });
  try {
    const turn = runTurn({
      cwd,
      prompt: "probe",
      env: hermeticEnv(server.url, root),
      settingsFile,
      allowedTools: ["Bash"],
      // The workspace lies under a denied folder (a worker's HOME, say): it stays readable, the rest not.
      toolSandbox: { allowDomains: [], denyRead: [root] },
      // A deep instance root: the run's own TMPDIR is too long for the CLI's sockets and is moved.
      configHome: { instanceId: "a".repeat(40), instanceRoot: join(root, "b".repeat(40)) },
    });
    let results = "";
    for await (const line of turn.lines) if (line.raw.includes('"tool_result"')) results += line.raw;
    await turn.outcome;
    assert.ok(existsSync(hookMark), "the caller's PreToolUse hook ran, outside the sandbox");
    assert.equal(existsSync(toolMark), false, "the Bash command could not write outside its workspace");
    assert.ok(
      results.includes("WORKSPACE-NOTES-1177") && !results.includes("PARENT-SECRET-3390"),
      "the workspace reads, its denied parent does not",
    );
    const tmp = /TMP=([^\\"]+)/.exec(results)?.[1] ?? "";
    assert.ok(
      tmp.length > 0 && tmp.length <= SOCKET_DIR_MAX + "/claude-0".length,
      `the sandbox started with a short TMPDIR (${tmp})`,
    );
    assert.deepEqual(
      JSON.parse(readFileSync(settingsFile, "utf8")),
      { hooks: { PreToolUse: [hook] } },
      "the caller's file is left as it was",
    );
  } finally {
    await server.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test("toolSandbox refuses a caller settings file that sets sandbox, and a trusted workspace", () => {
  const root = mkdtempSync(join(tmpdir(), "ts-sbx-cli-"));
  try {
    const settingsFile = join(root, "s.json");
    writeFileSync(settingsFile, JSON.stringify({ sandbox: { enabled: false } }));
    const sandbox = { allowDomains: [], denyRead: [] };
    assert.throws(
      () => runTurn({ cwd: root, prompt: "x", settingsFile, toolSandbox: sandbox }),
      /settingsFile.*sets "sandbox"/,
    );
    assert.throws(
      () => runTurn({ cwd: root, prompt: "x", trustWorkspace: true, toolSandbox: sandbox }),
      /toolSandbox.*trusted workspace/,
    );
    assert.throws(
      () => runTurn({ cwd: root, prompt: "x", toolSandbox: { allowDomains: ["http://x/"], denyRead: [] } }),
      /allowDomains/,
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("toolSandbox: the built-in Read tool is held off the denied paths too, even when the run skips permissions", async () => {
  const root = mkdtempSync(join(tmpdir(), "ts-sbx-cli-"));
  const cwd = join(root, "ws");
  const denied = join(root, "worker-files");
  mkdirSync(cwd);
  mkdirSync(denied);
  writeFileSync(join(denied, "key.txt"), "WORKER-KEY-4471");
  const read = {
    content: [{ type: "tool_use" as const, name: "Read", input: { file_path: join(denied, "key.txt") } }],
  };
  const server = await startModelServer({
    script: { responses: [read, { content: [{ type: "text", text: "done" }] }] },
  });
  try {
    const turn = runTurn({
      cwd,
      prompt: "read it",
      env: hermeticEnv(server.url, root),
      skipPermissions: true,
      sandboxed: true,
      toolSandbox: { allowDomains: [], denyRead: [denied] },
    });
    let results = "";
    for await (const line of turn.lines) if (line.raw.includes('"tool_result"')) results += line.raw;
    await turn.outcome;
    assert.ok(results.length > 0, "the Read call got a result");
    assert.equal(results.includes("WORKER-KEY-4471"), false, "the Read tool could not read the denied file");
  } finally {
    await server.close();
    rmSync(root, { recursive: true, force: true });
  }
});

/** A run's files for runSettings, made under `root`. */
function runFiles(root: string): RunFilesAccess & { cleanup(): void } {
  const undo: Array<() => void> = [];
  let scratch: string | undefined;
  return {
    scratchDir: () => (scratch ??= mkdtempSync(join(root, "scratch-"))),
    onCleanup: (step) => void undo.push(step),
    cleanup: () =>
      undo
        .splice(0)
        .reverse()
        .forEach((step) => step()),
  };
}

test("toolSandbox: the composed settings lie outside every folder the sandbox may write; file tools are denied them and the home's config", () => {
  const root = mkdtempSync(join(tmpdir(), "ts-sbx-cfg-"));
  const home = join(root, "home");
  mkdirSync(join(home, "tmp"), { recursive: true });
  const files = runFiles(join(home, "tmp"));
  try {
    const env: Record<string, string> = { TMPDIR: join(home, "tmp"), CLAUDE_CODE_TMPDIR: join(home, "tmp") };
    const sandbox = { allowDomains: [], denyRead: [root] };
    const input = { cwd: join(root, "ws"), addDirs: [], toolSandbox: sandbox, configHomeDir: home };
    const { file } = runSettings(input, env, files) as { file: string };
    const composed = JSON.parse(readFileSync(file, "utf8")) as {
      permissions: { deny: string[] };
      sandbox: { filesystem: { allowWrite: string[] } };
    };
    const writable = composed.sandbox.filesystem.allowWrite;
    assert.ok(writable.length > 0);
    for (const dir of writable) assert.ok(!file.startsWith(`${dir}/`), `${file} is not under writable ${dir}`);
    assert.ok(composed.permissions.deny.includes(`Edit(/${dirname(file)}/**)`));
    for (const entry of CONFIG_HOME_ENTRIES) assert.ok(composed.permissions.deny.includes(`Edit(/${home}/${entry})`));
    assert.ok(composed.permissions.deny.includes(`Read(/${home}/.credentials.json)`));
    assert.ok(!composed.permissions.deny.some((rule) => rule === `Edit(/${home}/**)`), "the home's temps stay usable");
    files.cleanup();
    assert.equal(existsSync(file), false, "the settings folder goes with the run");
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("toolSandbox: a run without a TMPDIR gets a private one, and one whose TMPDIR holds the system temp dir is refused", () => {
  const root = mkdtempSync(join(tmpdir(), "ts-sbx-cfg-"));
  const files = runFiles(root);
  try {
    const input = { cwd: root, addDirs: [], toolSandbox: { allowDomains: [], denyRead: [] } };
    const env: Record<string, string> = {};
    const { file } = runSettings(input, env, files) as { file: string };
    const allowWrite = (JSON.parse(readFileSync(file, "utf8")) as { sandbox: { filesystem: { allowWrite: string[] } } })
      .sandbox.filesystem.allowWrite;
    assert.ok(!allowWrite.includes(tmpdir()), `the shared temp dir is not writable: ${allowWrite.join(", ")}`);
    assert.notEqual(env["TMPDIR"], tmpdir());
    assert.throws(
      () => runSettings(input, { TMPDIR: tmpdir() }, files),
      /toolSandbox.*holds the system temp directory/,
    );
  } finally {
    files.cleanup();
    rmSync(root, { recursive: true, force: true });
  }
});
