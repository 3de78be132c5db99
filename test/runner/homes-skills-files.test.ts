import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
  lstatSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitUntil } from "./_support.ts";
import {
  captureSessionFile,
  ClaudeCodeCliError,
  createConfigHome,
  defaultInstanceRoot,
  injectSkills,
  NoAuthError,
  pointClaudeMdAtSkills,
  prepareSkillAddDir,
  projectSlug,
  restoreSessionFile,
  sessionFilePath,
  sweep,
  type Logger,
} from "../../src/runner/index.ts";

const tmp = (p: string): string => mkdtempSync(join(tmpdir(), p));

function recordingLogger(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  const noop = (): void => {};
  return {
    warnings,
    debug: noop,
    info: noop,
    error: noop,
    warn: (o: object | string, m?: string) => void warnings.push(typeof o === "string" ? o : (m ?? "")),
  };
}

test("config home with credential none (a brokered run): no copy of the operator's credential, auth from the env", () => {
  const root = tmp("ts-root-");
  const operator = tmp("ts-op-");
  writeFileSync(join(operator, ".credentials.json"), '{"claudeAiOauth":{"accessToken":"sk-ant-oat01-operator"}}', {
    mode: 0o600,
  });
  const home = createConfigHome({
    instanceId: "inst-b",
    instanceRoot: root,
    operatorConfigDir: operator,
    runEnv: { ANTHROPIC_API_KEY: "turnstream-gw-token" },
    credential: "none",
    logger: recordingLogger(),
  });
  try {
    assert.equal(home.auth, "env");
    assert.deepEqual(readdirSync(home.dir).sort(), ["run", "tmp"]);
  } finally {
    home.teardown();
  }
});

test("instance root defaults to the user data dir, not tmp", () => {
  assert.equal(defaultInstanceRoot({ XDG_DATA_HOME: "/data", HOME: "/h" }), "/data/turnstream");
  assert.equal(defaultInstanceRoot({ HOME: "/h" }), "/h/.local/share/turnstream");
});

test("config home: 0700, only a 0600 credential copy, own temp dirs; teardown removes it; rewrite warns", async () => {
  const root = tmp("ts-root-");
  const operator = tmp("ts-op-");
  writeFileSync(join(operator, ".credentials.json"), '{"claudeAiOauth":{"refreshToken":"r1"}}', { mode: 0o644 });
  writeFileSync(join(operator, "settings.json"), "{}");
  const logger = recordingLogger();
  const home = createConfigHome({
    instanceId: "inst-a",
    instanceRoot: root,
    operatorConfigDir: operator,
    runEnv: {},
    logger,
  });
  assert.equal(home.auth, "credential");
  assert.equal(home.dir, join(root, "instances", "inst-a", "config-homes", home.runId));
  assert.equal(statSync(home.dir).mode & 0o777, 0o700);
  assert.deepEqual(readdirSync(home.dir).sort(), [".credentials.json", "run", "tmp"]);
  assert.equal(statSync(join(home.dir, ".credentials.json")).mode & 0o777, 0o600);
  assert.equal(home.env["CLAUDE_CONFIG_DIR"], home.dir);
  for (const envName of ["TMPDIR", "CLAUDE_CODE_TMPDIR", "XDG_RUNTIME_DIR"])
    assert.ok(home.env[envName]!.startsWith(home.dir + "/"), envName);
  // While it runs, a sweep with threshold 0 must leave it alone (live lock).
  assert.deepEqual(sweep({ instanceId: "inst-a", instanceRoot: root, olderThanMs: 0 }).live, [home.runId]);
  writeFileSync(join(home.dir, ".credentials.json"), '{"claudeAiOauth":{"refreshToken":"r2"}}');
  home.teardown();
  assert.equal(existsSync(home.dir), false, "gone from config-homes when teardown returns");
  const trash = join(root, "instances", "inst-a", "trash");
  await waitUntil(() => readdirSync(trash).length === 0, 5000, "the background delete");
  assert.deepEqual(readdirSync(join(root, "instances", "inst-a", "live")), [], "its lock is gone too");
  assert.equal(logger.warnings.length, 1);
  assert.match(logger.warnings[0]!, /rewrote the per-run credential copy/);
  // An unchanged copy does not warn.
  const quiet = recordingLogger();
  createConfigHome({ instanceId: "inst-a", instanceRoot: root, operatorConfigDir: operator, logger: quiet }).teardown();
  assert.deepEqual(quiet.warnings, []);
});

test("config home: an instance's folders removed while the process runs (a sweep's trash, an operator's rm -r) are made again", async () => {
  const root = tmp("ts-root-");
  const operator = tmp("ts-op-");
  const make = () =>
    createConfigHome({
      instanceId: "inst-r",
      instanceRoot: root,
      operatorConfigDir: operator,
      runEnv: { ANTHROPIC_API_KEY: "k" },
    });
  make().teardown();
  const inst = join(root, "instances", "inst-r");
  // A sweep empties trash by removing it; then a home is torn down.
  const first = make();
  sweep({ instanceId: "inst-r", instanceRoot: root, olderThanMs: 0 });
  assert.equal(existsSync(join(inst, "trash")), false);
  first.teardown();
  assert.equal(existsSync(first.dir), false, "torn down although trash had to be made again");
  await waitUntil(() => readdirSync(join(inst, "trash")).length === 0, 5000, "the background delete");
  // The whole instance folder is gone: the next home makes it again.
  rmSync(inst, { recursive: true, force: true });
  const second = make();
  assert.ok(existsSync(second.dir) && existsSync(join(inst, "live")));
  second.teardown();
  assert.equal(existsSync(second.dir), false);
});

test("config home: later homes of an instance start with the install state the CLI wrote in an earlier one, and nothing else", () => {
  const root = tmp("ts-root-");
  const operator = tmp("ts-op-");
  const make = (instanceId: string) =>
    createConfigHome({
      instanceId,
      instanceRoot: root,
      operatorConfigDir: operator,
      runEnv: { ANTHROPIC_API_KEY: "k" },
    });
  const first = make("seeded");
  assert.equal(existsSync(join(first.dir, ".claude.json")), false, "nothing to seed from yet");
  const written = {
    firstStartTime: "2026-12-02T22:03:44.230Z",
    migrationVersion: 15,
    userID: "be78",
    pluginUsage: { "cc-plugin-agents-md@builtin": { usageCount: 0 } },
    projects: { "/work/secret-project": { allowedTools: ["Bash"], lastSessionId: "s-1" } },
    oauthAccount: { emailAddress: "someone@example.com" },
  };
  writeFileSync(join(first.dir, ".claude.json"), JSON.stringify(written));
  first.teardown();
  const second = make("seeded");
  const seed = JSON.parse(readFileSync(join(second.dir, ".claude.json"), "utf8")) as Record<string, unknown>;
  assert.deepEqual(Object.keys(seed).sort(), ["firstStartTime", "migrationVersion", "pluginUsage", "userID"]);
  assert.equal(seed["migrationVersion"], 15);
  assert.equal(statSync(join(second.dir, ".claude.json")).mode & 0o777, 0o600);
  second.teardown();
  const other = make("other-instance");
  assert.equal(existsSync(join(other.dir, ".claude.json")), false, "another instance has its own seed");
  other.teardown();
});

test("config home: no credential and no env auth is refused naming `claude auth login`; env auth gets an empty home", () => {
  const root = tmp("ts-root-");
  const operator = tmp("ts-op-");
  assert.throws(
    () =>
      createConfigHome({ instanceId: "i", instanceRoot: root, operatorConfigDir: operator, runEnv: { PATH: "/bin" } }),
    (err: unknown) =>
      err instanceof NoAuthError &&
      err instanceof ClaudeCodeCliError &&
      err.kind === "auth" &&
      /claude auth login/.test(err.message),
  );
  for (const runEnv of [
    { ANTHROPIC_API_KEY: "k" },
    { ANTHROPIC_AUTH_TOKEN: "t" },
    { CLAUDE_CODE_USE_BEDROCK: "1" },
    { CLAUDE_CODE_USE_VERTEX: "1" },
  ]) {
    const home = createConfigHome({ instanceId: "i", instanceRoot: root, operatorConfigDir: operator, runEnv });
    assert.equal(home.auth, "env");
    assert.deepEqual(readdirSync(home.dir).sort(), ["run", "tmp"]);
    home.teardown();
  }
});

test("sweep: removes old orphans of this instance only; never a live or young one, never another instance's; never throws", async () => {
  const root = tmp("ts-root-");
  const homes = (inst: string): string => join(root, "instances", inst, "config-homes");
  const orphan = (inst: string, name: string, ageMs: number): string => {
    const homeDir = join(homes(inst), name);
    mkdirSync(homeDir, { recursive: true });
    const mtimeSeconds = (Date.now() - ageMs) / 1000;
    utimesSync(homeDir, mtimeSeconds, mtimeSeconds);
    return homeDir;
  };
  const old = orphan("mine", "old-orphan", 3_600_000);
  const young = orphan("mine", "young-orphan", 1000);
  const theirs = orphan("other", "their-old", 3_600_000);
  // An old home whose lock names a live process (a child we own) is live.
  const child = spawn(process.execPath, ["-e", "process.stdin.resume()"], { stdio: ["pipe", "ignore", "ignore"] });
  await new Promise((r) => child.once("spawn", r));
  const liveHome = orphan("mine", "live-run", 3_600_000);
  mkdirSync(join(root, "instances", "mine", "live"), { recursive: true });
  writeFileSync(
    join(root, "instances", "mine", "live", "live-run.lock"),
    JSON.stringify({ pid: child.pid, runId: "live-run" }),
  );
  // An old home whose lock owner is dead is an orphan.
  const deadHome = orphan("mine", "dead-owner", 3_600_000);
  writeFileSync(
    join(root, "instances", "mine", "live", "dead-owner.lock"),
    JSON.stringify({ pid: 2 ** 22 + 12345, runId: "dead-owner" }),
  );
  // A home moved to trash by a host that died before deleting it.
  const trashed = join(root, "instances", "mine", "trash", "left-by-a-crash");
  mkdirSync(join(trashed, "projects"), { recursive: true });
  const swept = sweep({ instanceId: "mine", instanceRoot: root, olderThanMs: 600_000 });
  child.stdin!.end();
  assert.equal(existsSync(trashed), false, "trash is emptied");
  assert.deepEqual(swept.removed.sort(), ["dead-owner", "old-orphan"]);
  assert.deepEqual(swept.live, ["live-run"]);
  assert.deepEqual(swept.young, ["young-orphan"]);
  assert.equal(existsSync(old), false);
  assert.equal(existsSync(deadHome), false);
  assert.equal(existsSync(young), true);
  assert.equal(existsSync(liveHome), true);
  assert.equal(existsSync(theirs), true);
  assert.doesNotThrow(() => sweep({ instanceId: "../other", instanceRoot: root, olderThanMs: 0 }));
  assert.equal(existsSync(theirs), true);
  assert.doesNotThrow(() => sweep({ instanceId: "nothing-here", instanceRoot: "/proc/nonexistent", olderThanMs: 0 }));
});

test("session files: slug rule incl. the long-path hash; capture and restore round trip; ids validated", () => {
  assert.equal(projectSlug("/tmp/a b.c_d-é"), "-tmp-a-b-c-d--");
  assert.equal(projectSlug("/x😀"), "-x--");
  const long = "/" + "L".repeat(150) + "/" + "M".repeat(120);
  const slug = projectSlug(long);
  assert.equal(slug.length > 200, true);
  assert.match(slug, /^-L{150}-M{48}-[0-9a-z]+$/);
  const emptyConfig = tmp("ts-cfg-");
  const restoredConfig = tmp("ts-cfg-");
  assert.equal(captureSessionFile(emptyConfig, "/w/x", "abc"), undefined);
  const path = restoreSessionFile(restoredConfig, "/w/x", "abc", Buffer.from("line\n"));
  assert.equal(path, join(restoredConfig, "projects", "-w-x", "abc.jsonl"));
  assert.deepEqual(captureSessionFile(restoredConfig, "/w/x", "abc"), Buffer.from("line\n"));
  assert.throws(() => sessionFilePath(emptyConfig, "/w", "../../etc/passwd"));
  assert.throws(() => sessionFilePath(emptyConfig, "rel", "abc"));
});

function skillSource(name: string, body = "Say the word PINEAPPLE."): string {
  const sourceDir = tmp("ts-skill-");
  mkdirSync(join(sourceDir, name));
  writeFileSync(
    join(sourceDir, name, "SKILL.md"),
    `---\nname: ${name}\ndescription: test skill ${name}\n---\n${body}\n`,
  );
  writeFileSync(join(sourceDir, name, "extra.txt"), "resource");
  return join(sourceDir, name);
}

test("skills (claude-md): copied under .skills, CLAUDE.md kept, instruction once, only new skills appended", () => {
  const cwd = tmp("ts-cwd-");
  writeFileSync(join(cwd, "CLAUDE.md"), "# Project rules\nBe brief.");
  injectSkills(cwd, [{ name: "alpha", path: skillSource("alpha") }]);
  assert.equal(readFileSync(join(cwd, ".skills", "alpha", "extra.txt"), "utf8"), "resource");
  injectSkills(cwd, [
    { name: "alpha", path: skillSource("alpha") },
    { name: "beta", path: join(skillSource("beta"), "SKILL.md") },
  ]);
  const md = readFileSync(join(cwd, "CLAUDE.md"), "utf8");
  assert.ok(md.startsWith("# Project rules\nBe brief.\n"));
  assert.equal(md.split("turnstream:skills").length - 1, 1);
  assert.equal(md.split(".skills/alpha/SKILL.md").length - 1, 1);
  assert.equal(md.split(".skills/beta/SKILL.md").length - 1, 1);
  assert.match(md, /test skill beta/);
  // A skill dropped in by hand is picked up; a second call adds nothing.
  mkdirSync(join(cwd, ".skills", "gamma"));
  writeFileSync(join(cwd, ".skills", "gamma", "SKILL.md"), "gamma");
  assert.deepEqual(pointClaudeMdAtSkills(cwd), ["gamma"]);
  assert.deepEqual(pointClaudeMdAtSkills(cwd), []);
});

test("skills: names and paths validated, nothing written outside the target", () => {
  const cwd = tmp("ts-cwd-");
  const src = skillSource("ok");
  for (const bad of [
    { name: "..", path: src },
    { name: "a/../../x", path: src },
    { name: "/abs", path: src },
    { name: "ok", path: "relative/path" },
  ]) {
    assert.throws(
      () => injectSkills(cwd, [bad]),
      (e: unknown) => e instanceof ClaudeCodeCliError && e.kind === "bad_options",
    );
  }
  // `.skills` as a link out of the cwd is refused by name (WorkspacePathError), nothing written there.
  const cwd2 = tmp("ts-cwd-");
  const elsewhere = tmp("ts-elsewhere-");
  symlinkSync(elsewhere, join(cwd2, ".skills"));
  assert.throws(() => injectSkills(cwd2, [{ name: "ok", path: src }]), /\.skills is a symbolic link/);
  assert.deepEqual(readdirSync(elsewhere), []);
});

test("skills (add-dir): temp dir with .claude/skills/<name> links, removed by cleanup", () => {
  const src = skillSource("linked");
  const addDir = prepareSkillAddDir([{ name: "linked", path: src }]);
  const linkPath = join(addDir.dir, ".claude", "skills", "linked");
  assert.ok(lstatSync(linkPath).isSymbolicLink());
  assert.match(readFileSync(join(linkPath, "SKILL.md"), "utf8"), /PINEAPPLE/);
  addDir.cleanup();
  assert.equal(existsSync(addDir.dir), false);
  assert.equal(existsSync(src), true);
});
