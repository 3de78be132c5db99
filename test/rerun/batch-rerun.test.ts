// Re-runs as batch entries, with the real CLI: a recorded turn, then one batch file holding a plain
// turn, a re-run in a copy of the workspace (passes) and a re-run where the file the turn reads has
// changed (fails with the diff, a secret in it scrubbed): exit 1, the JUnit file with one failure,
// an ::error annotation pointing at the line, progress lines; a session the log does not hold is an
// <error> and exit 2. Re-run entries are checked at parse time (each needs its cwd: a recording never
// says where its re-run works; a turn recorded with permissions skipped re-runs so only when granted).
import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BatchFileError, loadBatchFile } from "../../src/bin/reports/batch-file.ts";
import { rig } from "../worker/_more.ts";
import { testSpace } from "../worker/_support.ts";
import { turnstream } from "../bin/_cli.ts";

const TIMEOUT = 120_000;
const SECRET = "zq81-very-private-value-77c2";

/** Each <testcase> of a JUnit document: its name and the body up to its end tag. */
function testcases(xml: string): Map<string, string> {
  return new Map([...xml.matchAll(/<testcase name="([^"]*)"[^>]*>([\s\S]*?)<\/testcase>/g)].map((m) => [m[1]!, m[2]!]));
}

test(
  "batch runs re-runs as test cases beside turns: a match passes, a changed file fails with the diff, exit 1; a session not in the log is an error, exit 2",
  { timeout: 180_000 },
  async () => {
    const testRig = await rig((ws: string) => ({
      responses: [
        {
          content: [
            { type: "tool_use", name: "Read", input: { file_path: join(ws, "notes.txt") } },
            { type: "tool_use", name: "Bash", input: { command: "wc -l notes.txt" } },
          ],
        },
        { content: [{ type: "text", text: "notes.txt has two lines." }] },
      ],
    }));
    try {
      writeFileSync(join(testRig.ws, "notes.txt"), "alpha\nbeta\n");
      testRig.worker({ sandboxed: true, retry: { maxAttempts: 1 } });
      const queued = await testRig.producer.enqueueTurn({
        prompt: "Summarise notes.txt.",
        cwd: testRig.ws,
        options: { skipPermissions: true },
      });
      assert.equal(
        (await testRig.producer.waitForTurn(queued.turn, { session: queued.session, timeoutMs: TIMEOUT })).status,
        "finished",
      );
      const same = join(testRig.ws, "..", "same");
      const changed = join(testRig.ws, "..", "changed");
      cpSync(testRig.ws, same, { recursive: true });
      cpSync(testRig.ws, changed, { recursive: true });
      writeFileSync(join(changed, "notes.txt"), `alpha\ngamma ${SECRET}\n`);

      const file = join(testRig.space.root, "suite.jsonl");
      const entries = [
        { prompt: "say done", cwd: testRig.ws, label: "plain turn" },
        { rerun: queued.session, cwd: same, permissionMode: "bypassPermissions", label: "same workspace" },
        { rerun: queued.session, turn: 1, cwd: changed, permissionMode: "bypassPermissions", label: "changed notes" },
      ];
      writeFileSync(file, entries.map((e) => JSON.stringify(e)).join("\n") + "\n");
      const junit = join(testRig.space.root, "junit.xml");
      const args = [
        "batch",
        file,
        "--junit",
        junit,
        "--github",
        "--prefix",
        testRig.space.logPrefix,
        "--queue-prefix",
        testRig.space.queuePrefix,
      ];
      const out = await turnstream(args, { SERVICE_TOKEN: SECRET, GITHUB_STEP_SUMMARY: "" }, TIMEOUT);

      assert.equal(out.code, 1, out.stdout + out.stderr);
      assert.match(out.stdout, /batch: 1 turn\(s\) queued, 2 re-run\(s\)/);
      assert.match(out.stdout, /\[2\/3\] same workspace +match /);
      assert.match(out.stdout, /\[3\/3\] changed notes +differs /);
      assert.match(
        out.stdout,
        /::error file=[^,]*suite\.jsonl,line=3,title=turnstream batch%3A changed notes \(failed%2C rerun_differs\)::.*step 1: tool result of Read/,
      );
      assert.match(out.stdout, /batch: 2 finished, 1 failed .*: task_failed \(exit 1\)/);

      const xml = readFileSync(junit, "utf8");
      assert.match(xml, /<testsuites [^>]*tests="3" failures="1" errors="0"/);
      const cases = testcases(xml);
      assert.deepEqual([...cases.keys()], ["plain turn", "same workspace", "changed notes"]);
      assert.doesNotMatch(cases.get("plain turn")!, /<failure|<error/);
      assert.doesNotMatch(cases.get("same workspace")!, /<failure|<error/);
      assert.match(
        cases.get("same workspace")!,
        /see the run: turnstream rerun \S+ --cwd \S+same --permission-mode bypassPermissions/,
      );
      const failure = /<failure message="[^"]*" type="rerun_differs">([\s\S]*?)<\/failure>/.exec(
        cases.get("changed notes")!,
      );
      assert.ok(failure, cases.get("changed notes"));
      assert.match(
        failure[1]!,
        /differs, the runs parted at step 1\n  step 1: tool result of Read\n    - recorded: .*beta.*\n    \+ re-run: +.*gamma/,
      );
      assert.match(failure[1]!, /gamma \[REDACTED:SERVICE_TOKEN\]/);
      assert.ok(
        !xml.includes(SECRET) && !out.stdout.includes(SECRET),
        "the secret in the changed file is scrubbed from every report",
      );

      // A session the log does not hold is the batch file's fault: an <error>, and usage outranks the rest.
      writeFileSync(
        file,
        [JSON.stringify({ rerun: "s-never-recorded", cwd: same, label: "gone" }), JSON.stringify(entries[1])].join(
          "\n",
        ) + "\n",
      );
      const missing = await turnstream(
        [
          "batch",
          file,
          "--junit",
          junit,
          "--prefix",
          testRig.space.logPrefix,
          "--queue-prefix",
          testRig.space.queuePrefix,
        ],
        {},
        TIMEOUT,
      );
      assert.equal(missing.code, 2, missing.stdout + missing.stderr);
      const missingXml = readFileSync(junit, "utf8");
      assert.match(missingXml, /<testsuites [^>]*tests="2" failures="0" errors="1"/);
      assert.match(
        testcases(missingXml).get("gone")!,
        /<error message="session s-never-recorded: the session&apos;s log holds no queued turn to re-run" type="no_recorded_turn">/,
      );
    } finally {
      await testRig.dispose();
    }
  },
);

test("re-run entries are checked when the file is read: each bad field named with its line, JSONL and YAML", () => {
  const space = testSpace();
  try {
    const dir = space.workspace();
    const yaml = join(space.root, "suite.yaml");
    writeFileSync(
      yaml,
      [
        "- rerun: s-recorded",
        "  turn: 2",
        "  cwd: workspaces/ws",
        "- rerun: s-other",
        `  cwd: ${dir}`,
        "  permissionMode: acceptEdits",
        "  label: whole session",
        "",
      ].join("\n"),
    );
    assert.deepEqual(loadBatchFile(yaml, space.root), [
      {
        line: 1,
        label: "rerun s-recorded turn 2",
        rerun: { session: "s-recorded", turn: "2", cwd: dir, permissionMode: "default" },
      },
      {
        line: 4,
        label: "whole session",
        rerun: { session: "s-other", turn: undefined, cwd: dir, permissionMode: "acceptEdits" },
      },
    ]);
    const bad = join(space.root, "bad.jsonl");
    const lines = [
      { rerun: "s-ok", cwd: dir },
      { rerun: "not a session id!", cwd: dir },
      { rerun: "s-ok", cwd: dir, prompt: "hi" },
      { rerun: "s-ok", cwd: dir, turn: 0 },
      { rerun: "s-ok", cwd: "missing-dir" },
      { rerun: "s-ok" },
      { rerun: "s-ok", cwd: dir, permissionMode: "yolo" },
    ];
    writeFileSync(bad, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
    assert.throws(
      () => loadBatchFile(bad, space.root),
      (error: unknown) =>
        error instanceof BatchFileError &&
        /6 bad line\(s\), nothing was enqueued/.test(error.message) &&
        !/line 1:/.test(error.message) &&
        /line 2: `rerun` must be the recorded session's id/.test(error.message) &&
        /line 3: a re-run entry takes `rerun`, `turn`, `cwd`, `permissionMode`, `label`; not `prompt`/.test(
          error.message,
        ) &&
        /line 4: `turn` must be a turn id or the turn's number/.test(error.message) &&
        /line 5: `cwd` \S+missing-dir does not exist/.test(error.message) &&
        /line 6: a re-run entry needs `cwd`/.test(error.message) &&
        /line 7: `permissionMode` must be one of default, acceptEdits/.test(error.message),
    );
  } finally {
    space.cleanup();
  }
});
