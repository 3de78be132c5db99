// One command-line frame for every `turnstream` command (listed from src/bin/commands/, so a new
// command is covered or this test fails): an unknown flag or a surplus argument is a usage error on
// stderr with exit 2, -h/--help prints the usage on stdout with exit 0, and a Redis that does not
// answer is one line naming its URL (no password, no stack trace) with exit 3.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onlyJson, turnstream, type CliRun } from "./_cli.ts";

interface CommandModule {
  run(argv: string[]): Promise<number>;
}

/**
 * Runs a command in this process with its stdout and stderr captured: the parse-level answers need no
 * process of their own, and a hundred spawns would take the file past its time budget.
 */
async function inProcess(command: string, args: string[]): Promise<CliRun> {
  const mod = (await import(join(process.cwd(), "src", "bin", "commands", `${command}.ts`))) as CommandModule;
  const said = { stdout: "", stderr: "" };
  const realOut = process.stdout.write;
  const realErr = process.stderr.write;
  process.stdout.write = ((chunk: string | Uint8Array) => (
    (said.stdout += String(chunk)),
    true
  )) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array) => (
    (said.stderr += String(chunk)),
    true
  )) as typeof process.stderr.write;
  try {
    const code = await mod.run(args);
    return { code, ...said };
  } finally {
    process.stdout.write = realOut;
    process.stderr.write = realErr;
  }
}

async function eachInProcess(calls: Array<[string, string[]]>): Promise<CliRun[]> {
  const out: CliRun[] = [];
  for (const [command, args] of calls) out.push(await inProcess(command, args));
  return out;
}

const commands = readdirSync(join(process.cwd(), "src", "bin", "commands"))
  .filter((f) => f.endsWith(".ts") && !f.startsWith("_"))
  .map((f) => f.slice(0, -3))
  .sort();

const scratch = mkdtempSync(join(tmpdir(), "ts-frame-"));
const recording = join(scratch, "run.jsonl");
writeFileSync(recording, "");
const keyFile = join(scratch, "operator.key");
const batchFile = join(scratch, "batch.jsonl");
writeFileSync(batchFile, JSON.stringify({ prompt: "hello", cwd: scratch }) + "\n");

const DEAD_REDIS = { REDIS_URL: "redis://operator:hunter2-secret@127.0.0.1:1", REDIS_CLUSTER_NODES: "" };
const SESSION = "s-frame-test";

/**
 * Runs each command line, a few at a time: twenty node processes at once on a loaded two-core CI
 * machine took longer to start than any bound a test should set.
 */
async function runEach(calls: string[][], env: Record<string, string>): Promise<CliRun[]> {
  const runs: CliRun[] = new Array(calls.length);
  let next = 0;
  const lane = async (): Promise<void> => {
    for (let slot = next++; slot < calls.length; slot = next++)
      runs[slot] = await turnstream(calls[slot]!, env, 60_000);
  };
  await Promise.all([lane(), lane(), lane()]);
  return runs;
}

/** Arguments that make each Redis command reach Redis at once (and nothing else first). */
const redisCalls: Record<string, string[]> = {
  batch: ["batch", batchFile],
  cancel: ["cancel", "t_frametest0001"],
  dashboard: ["dashboard", "--port", "0"],
  decide: ["decide", SESSION, "r1", "allow", "--key", keyFile],
  demo: ["demo"],
  export: ["export", SESSION],
  healthcheck: ["healthcheck"],
  import: ["import", SESSION, recording],
  pending: ["pending"],
  projector: ["projector"],
  "record-script": ["record-script", SESSION],
  replay: ["replay", SESSION],
  rerun: ["rerun", SESSION, "--cwd", scratch],
  retention: ["retention", "--archive", `file://${scratch}/archive`],
  rules: ["rules", "list"],
  run: ["run", "--", "hello"],
  sessions: ["sessions"],
  status: ["status"],
  tail: ["tail", SESSION],
  tenants: ["tenants"],
  worker: ["worker"],
};

/** Commands that never touch Redis, with arguments that make them do their work quickly. */
const offlineCalls: Record<string, string[]> = {
  acl: ["acl"],
  archive: ["archive", "migrate", "--archive", `file://${scratch}/archive`],
  doctor: ["doctor", "--claude-bin", join(scratch, "no-such-claude"), "--timeout-ms", "1000"],
  "model-server": ["model-server", "--script", join(scratch, "no-such-script.json")],
  "operator-key": ["operator-key", "public", join(scratch, "no-such.key")],
  parse: ["parse", recording],
  sweep: ["sweep", "--all", "--instance-root", scratch],
};

/** A surplus positional argument for each command (run and decide read words as a prompt or reason). */
const surplusCalls: Record<string, string[] | undefined> = {
  acl: ["acl", "extra"],
  archive: ["archive", "migrate", "extra"],
  batch: ["batch", batchFile, "extra"],
  cancel: ["cancel", "t_frametest0001", "extra"],
  dashboard: ["dashboard", "extra"],
  decide: ["decide", SESSION, "r1", "allow", "extra"],
  demo: ["demo", "extra"],
  doctor: ["doctor", "extra"],
  export: ["export", SESSION, "out.jsonl", "extra"],
  healthcheck: ["healthcheck", "extra"],
  import: ["import", SESSION, recording, "extra"],
  "model-server": ["model-server", "extra"],
  "operator-key": ["operator-key", "new", "extra"],
  parse: ["parse", recording, "extra"],
  pending: ["pending", "extra"],
  projector: ["projector", "extra"],
  "record-script": ["record-script", SESSION, "extra"],
  replay: ["replay", SESSION, "extra"],
  rerun: ["rerun", SESSION, "extra"],
  retention: ["retention", "extra"],
  rules: ["rules", "list", "extra"],
  run: undefined,
  sessions: ["sessions", "extra"],
  sweep: ["sweep", "--all", "extra"],
  status: ["status", "extra"],
  tail: ["tail", SESSION, "extra"],
  tenants: ["tenants", "list", "extra"],
  worker: ["worker", "extra"],
};

const ENV = { TURNSTREAM_WORKSPACE_ROOTS: scratch, TURNSTREAM_INSTANCE_ROOT: scratch, TURNSTREAM_OPERATOR_KEYS: "" };

function assertNoStack(cliRun: CliRun, what: string): void {
  assert.doesNotMatch(
    cliRun.stdout + cliRun.stderr,
    /^\s+at .+\(?.*:\d+:\d+\)?$/m,
    `${what}: no stack trace\n${cliRun.stderr}`,
  );
}

test("the tables cover every command", () => {
  assert.deepEqual([...Object.keys(redisCalls), ...Object.keys(offlineCalls)].sort(), commands);
  assert.deepEqual(Object.keys(surplusCalls).sort(), commands);
});

test("every command with an unknown flag: usage on stderr, exit 2", async () => {
  const runs = await eachInProcess(commands.map((c) => [c, ["--no-such-flag"]]));
  runs.forEach((cliRun, position) => {
    const commandName = commands[position]!;
    assert.equal(cliRun.code, 2, `${commandName}: ${cliRun.stderr}`);
    assert.match(cliRun.stderr, /usage: turnstream /, commandName);
    assert.match(cliRun.stderr, /--no-such-flag/, `${commandName} names the flag`);
    assert.equal(cliRun.stdout, "", commandName);
    assertNoStack(cliRun, commandName);
  });
});

test("every command with a surplus argument: usage on stderr, exit 2", async () => {
  const calls = Object.entries(surplusCalls).filter((e): e is [string, string[]] => e[1] !== undefined);
  const runs = await eachInProcess(calls.map(([c, args]) => [c, args.slice(1)]));
  runs.forEach((cliRun, position) => {
    const commandName = calls[position]![0];
    assert.equal(cliRun.code, 2, `${commandName}: ${cliRun.stderr}`);
    assert.match(cliRun.stderr, /usage: turnstream /, commandName);
    assertNoStack(cliRun, commandName);
  });
});

test("every command's -h and --help: usage on stdout, exit 0; turnstream --version", async () => {
  const runs = await eachInProcess(
    commands.flatMap((commandName): Array<[string, string[]]> => [
      [commandName, ["-h"]],
      [commandName, ["--help"]],
    ]),
  );
  runs.forEach((cliRun, position) => {
    const invocation = `${commands[Math.floor(position / 2)]} ${position % 2 === 0 ? "-h" : "--help"}`;
    assert.equal(cliRun.code, 0, `${invocation}: ${cliRun.stderr}`);
    assert.match(cliRun.stdout, /usage: turnstream /, invocation);
    assert.equal(cliRun.stderr, "", invocation);
  });
  const version = await turnstream(["--version"]);
  const pkg = JSON.parse(readFileSync(join(process.cwd(), "package.json"), "utf8")) as { version: string };
  assert.equal(version.code, 0);
  assert.equal(version.stdout.trim(), pkg.version);
});

test("Redis unreachable: every Redis command says so in one line naming the URL without its password, exit 3", async () => {
  const key = await turnstream(["operator-key", "new", "--out", keyFile, "--name", "frame"]);
  assert.equal(key.code, 0, key.stderr);
  const names = Object.keys(redisCalls);
  const runs = await runEach(
    names.map((c) => redisCalls[c]!),
    { ...ENV, ...DEAD_REDIS },
  );
  runs.forEach((cliRun, position) => {
    const commandName = names[position]!;
    assert.equal(cliRun.code, 3, `${commandName}: ${cliRun.stderr}`);
    const lines = cliRun.stderr.trim().split("\n");
    assert.equal(lines.length, 1, `${commandName}: one line\n${cliRun.stderr}`);
    assert.match(
      lines[0]!,
      new RegExp(`^turnstream ${commandName}: cannot reach Redis at redis://127\\.0\\.0\\.1:1`),
      commandName,
    );
    assert.ok(!(cliRun.stdout + cliRun.stderr).includes("hunter2"), `${commandName}: no password`);
    assertNoStack(cliRun, commandName);
  });
});

test("commands that never touch Redis do not fail for want of it", async () => {
  const names = Object.keys(offlineCalls);
  const runs = await runEach(
    names.map((c) => offlineCalls[c]!),
    { ...ENV, ...DEAD_REDIS },
  );
  runs.forEach((cliRun, position) => {
    const commandName = names[position]!;
    assert.doesNotMatch(cliRun.stdout + cliRun.stderr, /redis/i, commandName);
    assertNoStack(cliRun, commandName);
  });
  assert.equal(runs[names.indexOf("acl")]!.code, 0);
});

test("doctor speaks --json: one object with every check", async () => {
  const doctor = await turnstream(
    ["doctor", "--json", "--claude-bin", join(scratch, "no-such-claude"), "--timeout-ms", "1000"],
    ENV,
  );
  assert.equal(doctor.code, 3, doctor.stderr);
  const said = onlyJson(doctor.stdout) as { ok: boolean; checks: Array<{ name: string; status: string }> };
  assert.equal(said.ok, false);
  assert.equal(said.checks.find((c) => c.name === "cli")?.status, "fail");
});
