// `turnstream run --wait` says of a turn what `batch` says of each of its turns (one report: message,
// attempts, tool calls, seconds, cost, tokens), and a signal while it follows the turn is said with how
// to cancel it, exits 130 (SIGINT) or 143 (SIGTERM), and with --cancel-on-interrupt cancels the turn.
// The real CLI runs each turn on an in-process worker against the scripted model server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { EXIT_ON_SIGNAL } from "../../src/bin/exit-codes.ts";
import { kindsOf, rig, type Rig } from "../worker/_more.ts";
import { waitUntil } from "../worker/_support.ts";
import { onlyJson, startTurnstream, turnstream } from "./_cli.ts";

const flagsOf = (setup: Rig): string[] => [
  "--prefix",
  setup.space.logPrefix,
  "--queue-prefix",
  setup.space.queuePrefix,
  "--cwd",
  setup.ws,
];

interface RunReport {
  session: string;
  turn: string;
  status: string;
  outcome: string;
  exitCode: number;
  message?: string;
  attempts: number;
  toolCalls: number;
  seconds: number;
  costUsd: number;
  tokens: { input: number; output: number; cacheRead: number; cacheCreation: number };
  errorKind?: string;
  signal?: string;
  cancel?: string;
  cancelCommand?: string;
}

/** The one JSON object a `run --json` printed. */
function reportOf(stdout: string): RunReport {
  onlyJson(stdout);
  return JSON.parse(stdout) as RunReport;
}

test("a failed turn: the reason the log holds, scrubbed, on stderr; --json has the report batch writes of a turn", async () => {
  // Every request of the run reads the marker file again, so with maxTurns 1 it ends max_turns, after a
  // tool call, with the scripted usage counted.
  const read = (ws: string) => ({
    match: "LOOP-MARK",
    usage: { input_tokens: 1200, output_tokens: 80 },
    content: [{ type: "tool_use", name: "Read", input: { file_path: join(ws, "loop.txt") } }],
  });
  const setup = await rig((ws: string) => ({ responses: [read(ws), read(ws), read(ws), read(ws)] }));
  writeFileSync(join(setup.ws, "loop.txt"), "LOOP-MARK again\n");
  setup.worker();
  try {
    const args = ["run", "--wait", "--max-turns", "1", ...flagsOf(setup), "--", "LOOP-MARK: read loop.txt"];
    const text = await turnstream(args, {}, 170_000);
    assert.equal(text.code, 1, text.stdout + text.stderr);
    const said = /^turnstream run: turn \S+ failed \(max_turns\): task_failed \((.+)\)$/m.exec(text.stderr);
    assert.ok(said, text.stderr);
    assert.match(
      text.stdout,
      /^turn \S+ failed: attempt 1, 1 tool call\(s\), [\d.]+ s, \$[\d.]+, \d+ tokens in, \d+ out$/m,
    );

    const json = await turnstream(["run", "--json", ...args.slice(1)], {}, 170_000);
    assert.equal(json.code, 1, json.stderr);
    const report = reportOf(json.stdout);
    assert.equal(report.status, "failed");
    assert.equal(report.outcome, "task_failed");
    assert.equal(report.errorKind, "max_turns");
    const [failed] = (await setup.events(report.session)).filter((e) => e.kind === "turn.failed");
    const logged = (failed!.data as { error: { message: string } }).error.message;
    assert.equal(report.message, logged, "the message is the one the log holds");
    assert.equal(said[1], logged);
    assert.equal(report.attempts, 1);
    assert.equal(report.toolCalls, 1);
    assert.ok(report.seconds > 0);
    assert.ok(report.tokens.input >= 1200 && report.tokens.output >= 80, JSON.stringify(report.tokens));
    assert.ok(report.costUsd > 0, `cost ${report.costUsd}`);

    // A reason holding a secret of the command's environment (the worker does not know it, so the log
    // keeps it) is printed scrubbed: a cwd the worker refuses, named in its message.
    const secret = "run-report-secret-value-4711";
    const env = { RUN_REPORT_TEST_TOKEN: secret };
    const missing = join(setup.ws, `gone-${secret}`);
    const refused = await turnstream(["run", "--wait", ...flagsOf(setup), "--cwd", missing, "--", "hello"], env);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /failed \(bad_cwd\): usage \(.*gone-\[REDACTED:RUN_REPORT_TEST_TOKEN\]/);
    const refusedJson = await turnstream(
      ["run", "--wait", "--json", ...flagsOf(setup), "--cwd", missing, "--", "hi"],
      env,
    );
    assert.ok(!(refused.stdout + refused.stderr + refusedJson.stdout).includes(secret));
    const refusedReport = reportOf(refusedJson.stdout);
    assert.match(refusedReport.message!, /REDACTED:RUN_REPORT_TEST_TOKEN/);
    const stored = (await setup.events(refusedReport.session)).find((e) => e.kind === "turn.failed");
    assert.ok(JSON.stringify(stored?.data).includes(secret), "the log held it: the command scrubbed it");
  } finally {
    await setup.dispose();
  }
});

/** A turn whose model answer takes a minute: long enough to signal the command that follows it. */
async function slowTurnRig(): Promise<Rig> {
  const setup = await rig({ responses: [{ delayMs: 60_000, content: [{ type: "text", text: "late" }] }] });
  setup.worker();
  return setup;
}

test("SIGINT while waiting: exit 130, what happened and how to cancel; the turn goes on running", async () => {
  const setup = await slowTurnRig();
  try {
    const command = startTurnstream(["run", "--wait", "--json", ...flagsOf(setup), "--", "take your time"]);
    await command.waitForOutput(/running, attempt 1/);
    command.child.kill("SIGINT");
    const ended = await command.exited;
    assert.equal(ended.code, EXIT_ON_SIGNAL.SIGINT, ended.stderr);
    const report = reportOf(ended.stdout);
    assert.deepEqual(
      [report.status, report.outcome, report.exitCode, report.signal, report.cancel],
      ["unended", "interrupted", 130, "SIGINT", undefined],
    );
    assert.equal(report.attempts, 1);
    const cancel = `turnstream cancel ${report.turn} --prefix ${setup.space.logPrefix} --queue-prefix ${setup.space.queuePrefix}`;
    assert.equal(report.cancelCommand, cancel);
    assert.match(
      report.message!,
      new RegExp(`^interrupted by SIGINT while following turn ${report.turn}; it goes on running`),
    );
    const kinds = kindsOf(await setup.events(report.session));
    assert.ok(!kinds.includes("turn.cancelled"), kinds.join(" "));

    // Without --json the same is said on stderr.
    const plain = startTurnstream(["run", "--wait", ...flagsOf(setup), "--", "take your time again"]);
    await plain.waitForOutput(/^turn \S+ in session/m);
    plain.child.kill("SIGINT");
    const plainEnd = await plain.exited;
    assert.equal(plainEnd.code, 130);
    assert.match(
      plainEnd.stderr,
      /^turnstream run: interrupted by SIGINT while following turn (\S+); it goes on running \(turnstream cancel \1 /m,
    );
  } finally {
    await setup.dispose();
  }
});

test("SIGTERM with --cancel-on-interrupt: the turn is cancelled before the command exits 143", async () => {
  const setup = await slowTurnRig();
  try {
    const command = startTurnstream([
      "run",
      "--wait",
      "--json",
      "--cancel-on-interrupt",
      ...flagsOf(setup),
      "--",
      "stop when the job is cancelled",
    ]);
    await command.waitForOutput(/running, attempt 1/);
    command.child.kill("SIGTERM");
    const ended = await command.exited;
    assert.equal(ended.code, EXIT_ON_SIGNAL.SIGTERM, ended.stderr);
    const report = reportOf(ended.stdout);
    assert.deepEqual(
      [report.outcome, report.exitCode, report.signal, report.cancel, report.cancelCommand],
      ["interrupted", 143, "SIGTERM", "requested", undefined],
    );
    // A running turn: its worker ends it and records why.
    await waitUntil(
      async () => kindsOf(await setup.events(report.session)).includes("turn.cancelled"),
      30_000,
      "turn.cancelled",
    );

    const misuse = await turnstream(["run", "--cancel-on-interrupt", ...flagsOf(setup), "--", "no wait"]);
    assert.equal(misuse.code, 2);
    assert.match(misuse.stderr, /--cancel-on-interrupt only applies with --wait/);
  } finally {
    await setup.dispose();
  }
});
