// `turnstream batch FILE`: a bad line stops the batch before anything is queued; turns over several
// sessions run on a worker and come out as a JUnit file a strict XML reader accepts with the shape
// CI test reporters need; a failing turn exits 1 with a <failure>, ::error annotations and a step
// summary; --timeout ends the wait with exit 4. The JUnit documents are read with a small strict
// XML parser (below), so malformed nesting, quoting, entities or control characters fail the tests.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { junitXml, xmlAttr, xmlText } from "../../src/bin/reports/junit.ts";
import { annotations, stepSummary } from "../../src/bin/reports/github.ts";
import { LiveProgress, TurnProgress } from "../../src/bin/reports/progress.ts";
import { batchReport, worstOutcome, type BatchTurnResult } from "../../src/bin/reports/turn-result.ts";
import { BatchFileError, loadBatchFile } from "../../src/bin/reports/batch-file.ts";
import { rig } from "../worker/_more.ts";
import { cleanupKeys, redisFor, testSpace } from "../worker/_support.ts";
import { onlyJson, turnstream } from "./_cli.ts";

// ---- a strict little XML reader -------------------------------------------------------------------

interface XmlElement {
  name: string;
  attrs: Record<string, string>;
  children: XmlElement[];
  text: string;
}

const XML_CHAR_FORBIDDEN = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/;

/** Entity references resolved; a bare `&`, an unknown entity or a reference to a forbidden character throws. */
function decodeEntities(raw: string): string {
  const named: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };
  const decoded = raw.replace(/&([^;]*);?/g, (whole, body: string) => {
    if (!whole.endsWith(";")) throw new Error(`bare & in ${JSON.stringify(raw)}`);
    if (named[body] !== undefined) return named[body];
    const code = /^#x[0-9a-fA-F]+$/.test(body)
      ? parseInt(body.slice(2), 16)
      : /^#\d+$/.test(body)
        ? Number(body.slice(1))
        : undefined;
    if (code === undefined) throw new Error(`unknown entity &${body};`);
    const char = String.fromCodePoint(code);
    if (XML_CHAR_FORBIDDEN.test(char)) throw new Error(`character reference to a forbidden character &${body};`);
    return char;
  });
  return decoded;
}

function attributesOf(source: string): Record<string, string> {
  const attrs: Record<string, string> = {};
  for (const attribute of source.matchAll(/\s+([A-Za-z_][\w.:-]*)="([^"<]*)"/g)) {
    assert.ok(!(attribute[1]! in attrs), `duplicate attribute ${attribute[1]}`);
    attrs[attribute[1]!] = decodeEntities(attribute[2]!);
  }
  return attrs;
}

/** Parses a whole document: declaration, one root, matched tags, quoted attributes, valid entities. */
function parseXml(doc: string): XmlElement {
  assert.doesNotMatch(doc, XML_CHAR_FORBIDDEN, "no character XML 1.0 forbids");
  assert.ok(!doc.includes("]]>"), "no ]]> outside CDATA");
  const decl = /^<\?xml version="1\.0" encoding="UTF-8"\?>\s*/.exec(doc);
  assert.ok(decl, "an XML declaration first");
  const token = /<\/([A-Za-z_][\w.-]*)\s*>|<([A-Za-z_][\w.-]*)((?:\s+[A-Za-z_][\w.:-]*="[^"<]*")*)\s*(\/?)>|([^<]+)/y;
  const stack: XmlElement[] = [];
  let root: XmlElement | undefined;
  let offset = decl[0].length;
  while (offset < doc.length) {
    token.lastIndex = offset;
    const match = token.exec(doc);
    if (match === null)
      throw new Error(`malformed XML at offset ${offset}: ${JSON.stringify(doc.slice(offset, offset + 40))}`);
    offset = token.lastIndex;
    if (match[1] !== undefined) {
      const open = stack.pop();
      assert.equal(open?.name, match[1], `</${match[1]}> closes <${open?.name}>`);
    } else if (match[2] !== undefined) {
      const element: XmlElement = { name: match[2], attrs: attributesOf(match[3]!), children: [], text: "" };
      if (stack.length === 0) {
        assert.equal(root, undefined, "one root element");
        root = element;
      } else stack.at(-1)!.children.push(element);
      if (match[4] !== "/") stack.push(element);
    } else if (stack.length === 0) assert.match(match[5]!, /^\s*$/, "only whitespace outside the root");
    else stack.at(-1)!.text += decodeEntities(match[5]!);
  }
  assert.equal(stack.length, 0, `unclosed <${stack.at(-1)?.name}>`);
  assert.ok(root, "a root element");
  return root;
}

const VERDICTS = ["failure", "error", "skipped"];

function assertNumber(value: string | undefined, what: string): number {
  assert.match(value ?? "", /^\d+(\.\d+)?$/, `${what} is a number`);
  return Number(value);
}

/** What Jenkins, GitLab and the GitHub reporters need of a testcase; its verdict element's name, if any. */
function checkTestcase(tc: XmlElement): string | undefined {
  assert.equal(tc.name, "testcase");
  assert.ok((tc.attrs["name"] ?? "").length > 0, "testcase name");
  assert.ok((tc.attrs["classname"] ?? "").length > 0, "testcase classname");
  assertNumber(tc.attrs["time"], "testcase time");
  const order = ["properties", ...VERDICTS, "system-out", "system-err"];
  const positions = tc.children.map((c) => order.indexOf(c.name));
  assert.ok(
    positions.every((p) => p >= 0),
    `testcase children: ${tc.children.map((c) => c.name).join(",")}`,
  );
  assert.deepEqual(
    positions,
    [...positions].sort((a, b) => a - b),
    "children in schema order",
  );
  const verdicts = tc.children.filter((c) => VERDICTS.includes(c.name));
  assert.ok(verdicts.length <= 1, "at most one failure/error/skipped");
  for (const verdict of verdicts.filter((v) => v.name !== "skipped"))
    assert.ok(
      verdict.attrs["message"] !== undefined && (verdict.attrs["type"] ?? "").length > 0,
      `${verdict.name} has message and type`,
    );
  for (const property of tc.children.find((c) => c.name === "properties")?.children ?? [])
    assert.ok(
      property.name === "property" && property.attrs["name"] !== undefined && property.attrs["value"] !== undefined,
    );
  return verdicts[0]?.name;
}

function checkSuiteCounts(suite: XmlElement, cases: XmlElement[], verdicts: Array<string | undefined>): void {
  for (const attr of ["name", "tests", "failures", "errors", "time"])
    assert.ok(suite.attrs[attr] !== undefined, `<${suite.name}> has ${attr}`);
  assert.equal(assertNumber(suite.attrs["tests"], "tests"), cases.length);
  assert.equal(assertNumber(suite.attrs["failures"], "failures"), verdicts.filter((v) => v === "failure").length);
  assert.equal(assertNumber(suite.attrs["errors"], "errors"), verdicts.filter((v) => v === "error").length);
  assert.equal(Number(suite.attrs["skipped"] ?? 0), verdicts.filter((v) => v === "skipped").length);
  assertNumber(suite.attrs["time"], "time");
}

/** Parses a JUnit document and checks its structure; its testcases. */
function readJunit(doc: string): XmlElement[] {
  const root = parseXml(doc);
  assert.equal(root.name, "testsuites");
  assert.ok(root.children.length >= 1 && root.children.every((c) => c.name === "testsuite"));
  const all: XmlElement[] = [];
  const allVerdicts: Array<string | undefined> = [];
  for (const suite of root.children) {
    assert.ok(
      suite.children.every((c) => c.name === "testcase"),
      "a testsuite holds testcases",
    );
    const verdicts = suite.children.map(checkTestcase);
    checkSuiteCounts(suite, suite.children, verdicts);
    all.push(...suite.children);
    allVerdicts.push(...verdicts);
  }
  checkSuiteCounts(root, all, allVerdicts);
  return all;
}

const property = (tc: XmlElement, name: string): string | undefined =>
  tc.children.find((c) => c.name === "properties")?.children.find((p) => p.attrs["name"] === name)?.attrs["value"];
const child = (tc: XmlElement, name: string): XmlElement | undefined => tc.children.find((c) => c.name === name);

// ---- reports from a made-up batch -----------------------------------------------------------------

function turnResult(over: Partial<BatchTurnResult>): BatchTurnResult {
  return {
    line: 1,
    label: "a turn",
    session: "s-1",
    turn: "t_abcdefgh01",
    status: "finished",
    outcome: "finished",
    attempts: 1,
    toolCalls: 0,
    costUsd: 0,
    tokens: { input: 0, output: 0, cacheRead: 0, cacheCreation: 0 },
    seconds: 1.5,
    errorKind: undefined,
    message: undefined,
    resultText: "ok",
    ...over,
  };
}

const NASTY = `<b> & "quotes" 'apos' ]]> tab\tnl\ncr\r bell\u0007 nul\u0000 esc\u001b lone\uD800 end`;

test("the JUnit document survives markup, quotes and control characters in every text, and maps each outcome", () => {
  const turns = [
    turnResult({ line: 1, label: NASTY }),
    turnResult({
      line: 2,
      status: "failed",
      outcome: "task_failed",
      errorKind: "max_turns",
      message: NASTY,
      attempts: 2,
    }),
    turnResult({ line: 3, status: "failed", outcome: "infrastructure", errorKind: "rate_limit", message: "429" }),
    turnResult({ line: 4, status: "cancelled", outcome: "cancelled", message: "by hand" }),
    turnResult({ line: 5, status: "unended", outcome: "timed_out", message: "did not end within --timeout" }),
  ];
  const cases = readJunit(junitXml(batchReport("batch & <co>.jsonl", new Date(), turns)));
  assert.equal(cases.length, 5);
  assert.equal(
    cases[0]!.attrs["name"],
    NASTY.replace(/[\u0007\u0000\u001b]|\uD800/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`),
  );
  assert.equal(checkTestcase(cases[0]!), undefined);
  assert.equal(child(cases[1]!, "failure")?.attrs["type"], "max_turns");
  assert.match(child(cases[1]!, "failure")!.text, /<b> & "quotes"/);
  assert.equal(property(cases[1]!, "attempts"), "2");
  assert.equal(child(cases[2]!, "error")?.attrs["type"], "rate_limit");
  assert.ok(child(cases[3]!, "skipped"));
  assert.equal(child(cases[4]!, "failure")?.attrs["type"], "timed_out");
  assert.match(child(cases[0]!, "system-out")!.text, /turnstream replay s-1/);
  assert.equal(xmlText("a\u0001b"), "a\\u0001b");
  // The reader is strict: each of these would pass a lenient regex check.
  for (const bad of [
    "<a><b></a></b>",
    '<a x="1" x="2"/>',
    "<a x=1/>",
    "<a>&</a>",
    "<a>&nbsp;</a>",
    "<a>\u0001</a>",
    "<a>&#1;</a>",
    "<a/><b/>",
    "<a>",
  ]) {
    assert.throws(() => parseXml(`<?xml version="1.0" encoding="UTF-8"?>\n${bad}`), bad);
  }
  assert.equal(xmlAttr("x\ny"), "x&#10;y");
});

test("the batch's outcome is its worst turn's: infrastructure > usage > task failed > cancelled/timed out > finished", () => {
  assert.equal(worstOutcome([]), "finished");
  assert.equal(worstOutcome(["finished", "cancelled", "task_failed"]), "task_failed");
  assert.equal(worstOutcome(["timed_out", "usage", "task_failed"]), "usage");
  assert.equal(worstOutcome(["usage", "infrastructure", "finished"]), "infrastructure");
  assert.equal(worstOutcome(["finished", "timed_out"]), "timed_out");
  assert.equal(
    batchReport("f", new Date(), [turnResult({ outcome: "usage" }), turnResult({ outcome: "cancelled" })]).exitCode,
    2,
  );
});

test("annotations escape the workflow-command characters and point at the batch file's line", () => {
  const report = batchReport("dir/b,1.jsonl", new Date(), [
    turnResult({
      line: 7,
      label: "fix: the build, now",
      status: "failed",
      outcome: "task_failed",
      errorKind: "max_turns",
      message: "100% stuck\nsecond line",
    }),
    turnResult({ line: 8 }),
  ]);
  const lines = annotations(report);
  assert.equal(lines.length, 1);
  assert.equal(
    lines[0],
    "::error file=dir/b%2C1.jsonl,line=7,title=turnstream batch%3A fix%3A the build%2C now (failed%2C max_turns)::100%25 stuck%0Asecond line%0Asee the run: turnstream replay s-1",
  );
  const summary = stepSummary(report);
  assert.match(
    summary,
    /^\| fix: the build, now \| ❌ failed \(max_turns\) \| 1 \| 1\.5 s \| `turnstream replay s-1` \|$/m,
  );
  // A label is text, not markup: a tag in it would vanish from the rendered summary or swallow the rows after it.
  const marked = stepSummary(
    batchReport("b.jsonl", new Date(), [turnResult({ line: 1, label: "<details> a | b & c" })]),
  );
  assert.match(marked, /^\| &lt;details&gt; a \\\| b &amp; c \| /m);
});

test("on a terminal each turn keeps one line, redrawn in place", () => {
  const turns = [new TurnProgress("first"), new TurnProgress("second")];
  const written: string[] = [];
  const live = new LiveProgress(turns, (t) => written.push(t), 80);
  turns[1]!.read({ kind: "attempt.started", attempt: 1, at: new Date().toISOString(), data: {} } as never);
  live.close();
  assert.equal(written.length, 2);
  assert.doesNotMatch(written[0]!, /\x1b\[2A/);
  assert.match(
    written[1]!,
    /^\x1b\[2A\r\x1b\[2Kfirst +queued +attempt 0 +0 tool call\(s\) +0\.0 s\n\r\x1b\[2Ksecond +running +attempt 1/,
  );
});

// ---- the command --------------------------------------------------------------------------------

test("a bad line: exit 2 naming each bad line and its field, and nothing is enqueued", async () => {
  const space = testSpace();
  const redis = redisFor();
  const ws = space.workspace();
  const file = join(space.root, "bad.jsonl");
  const good = JSON.stringify({ session: "s-good", prompt: "fine", cwd: ws });
  writeFileSync(
    file,
    [
      good,
      JSON.stringify({ session: "s-good", prompt: "x", cwd: ws, options: { maxTurns: "three" } }),
      "",
      "{not json",
      JSON.stringify({ prompt: "hi {{name}}" }),
    ].join("\n"),
  );
  try {
    const batchRun = await turnstream([
      "batch",
      file,
      "--prefix",
      space.logPrefix,
      "--queue-prefix",
      space.queuePrefix,
    ]);
    assert.equal(batchRun.code, 2, batchRun.stderr);
    assert.match(batchRun.stderr, /3 bad line\(s\), nothing was enqueued/);
    assert.match(batchRun.stderr, /bad\.jsonl line 2: invalid turn: `options\.maxTurns`/);
    assert.match(batchRun.stderr, /bad\.jsonl line 4: not JSON/);
    assert.match(batchRun.stderr, /bad\.jsonl line 5: prompt placeholder \{\{name\}\} has no value/);
    const json = await turnstream(["batch", file, "--json"]);
    assert.equal(onlyJson(json.stdout)["outcome"], "usage");
    const keys = [...(await redis.keys(`${space.logPrefix}*`)), ...(await redis.keys(`${space.queuePrefix}*`))];
    assert.deepEqual(keys, [], "nothing enqueued");
    const checked = await turnstream(["batch", "--check", file]);
    assert.equal(checked.code, 2);
    const twoFiles = await turnstream(["batch", "--json", file, file]);
    assert.equal(twoFiles.code, 2);
    assert.match(twoFiles.stderr, /takes exactly one batch FILE, got 2\nusage: turnstream batch/);
    assert.equal(onlyJson(twoFiles.stdout)["outcome"], "usage");
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

// A few turns, two per session, show the JUnit file and the order per session; many more run with
// `npm run bench -- batch`.
const BATCH_TURNS = 6;
const BATCH_SESSIONS = 3;

test("turns over several sessions run on a worker: exit 0, one JUnit testcase per turn, one JSON object", async () => {
  const setup = await rig({ responses: [] });
  setup.worker({ concurrency: BATCH_SESSIONS });
  const file = join(setup.space.root, "several.jsonl");
  const junit = join(setup.space.root, "several.xml");
  const sessions = Array.from({ length: BATCH_SESSIONS }, (_, i) => `s-batch-${i}`);
  const lines = Array.from({ length: BATCH_TURNS }, (_, line) =>
    JSON.stringify({
      session: sessions[line % BATCH_SESSIONS],
      prompt: `turn ${line} of the batch`,
      cwd: setup.ws,
      label: `turn ${line}`,
    }),
  );
  writeFileSync(file, lines.join("\n") + "\n");
  try {
    const run = await turnstream(
      [
        "batch",
        file,
        "--json",
        "--junit",
        junit,
        "--prefix",
        setup.space.logPrefix,
        "--queue-prefix",
        setup.space.queuePrefix,
      ],
      {},
      170_000,
    );
    assert.equal(run.code, 0, run.stderr + run.stdout);
    const said = onlyJson(run.stdout) as {
      outcome: string;
      exitCode: number;
      turns: Array<{ status: string; session: string; turn: string; attempts: number; line: number }>;
    };
    assert.equal(said.outcome, "finished");
    assert.equal(said.turns.length, BATCH_TURNS);
    assert.ok(said.turns.every((t) => t.status === "finished" && t.attempts === 1));
    assert.deepEqual(
      said.turns.map((t) => t.line),
      Array.from({ length: BATCH_TURNS }, (_, i) => i + 1),
    );
    const last = `\\[${BATCH_TURNS}/${BATCH_TURNS}\\] turn ${BATCH_TURNS - 1} +finished`;
    assert.match(run.stderr, new RegExp(last), "plain progress lines on stderr under --json");
    const cases = readJunit(readFileSync(junit, "utf8"));
    assert.equal(cases.length, BATCH_TURNS);
    assert.deepEqual(new Set(cases.map((c) => c.attrs["classname"])), new Set(sessions));
    assert.ok(
      cases.every(
        (c, i) => c.attrs["name"] === `turn ${i}` && checkTestcase(c) === undefined && property(c, "attempts") === "1",
      ),
    );
    // Each session's turns ran in file order: its turn.finished events come in line order.
    for (const [index, session] of sessions.entries()) {
      const finished = (await setup.events(session)).filter((e) => e.kind === "turn.finished").map((e) => e.turn);
      const inFile = said.turns.filter((_, line) => line % BATCH_SESSIONS === index).map((t) => t.turn);
      assert.deepEqual(finished, inFile, session);
    }
  } finally {
    await setup.dispose();
  }
});

test("a failing turn: exit 1, a <failure>, an ::error annotation and a step summary row per turn", async () => {
  // The failing turn keeps reading a file that holds its marker, so every request of its run (its prompt,
  // then each tool result) takes a Read; with maxTurns 1 it ends max_turns. The other turn gets `done`.
  const read = (ws: string) => ({
    match: "LOOP-MARK",
    content: [{ type: "tool_use", name: "Read", input: { file_path: join(ws, "loop.txt") } }],
  });
  const setup = await rig((ws: string) => ({ responses: [read(ws), read(ws), read(ws), read(ws)] }));
  writeFileSync(join(setup.ws, "loop.txt"), "LOOP-MARK again\n");
  setup.worker({ concurrency: 2 });
  const file = join(setup.space.root, "failing.jsonl");
  const junit = join(setup.space.root, "failing.xml");
  const summary = join(setup.space.root, "summary.md");
  writeFileSync(summary, "earlier step\n");
  writeFileSync(
    file,
    [
      JSON.stringify({ prompt: "just answer", cwd: setup.ws, label: "passes" }),
      JSON.stringify({ prompt: "LOOP-MARK: read loop.txt", cwd: setup.ws, options: { maxTurns: 1 } }),
    ].join("\n"),
  );
  try {
    const run = await turnstream(
      [
        "batch",
        file,
        "--github",
        "--junit",
        junit,
        "--prefix",
        setup.space.logPrefix,
        "--queue-prefix",
        setup.space.queuePrefix,
      ],
      { GITHUB_STEP_SUMMARY: summary },
      170_000,
    );
    assert.equal(run.code, 1, run.stderr + run.stdout);
    assert.match(
      run.stdout,
      /^::error file=.*failing\.jsonl,line=2,title=turnstream batch%3A LOOP-MARK%3A read loop\.txt \(failed%2C max_turns\)::.+see the run: turnstream replay \S+$/m,
    );
    assert.equal(run.stdout.match(/^::error/gm)?.length, 1);
    assert.match(run.stdout, /batch: 1 finished, 1 failed in [\d.]+ s: task_failed \(exit 1\)/);
    const cases = readJunit(readFileSync(junit, "utf8"));
    assert.equal(cases.length, 2);
    assert.equal(checkTestcase(cases[0]!), undefined);
    const failure = child(cases[1]!, "failure");
    assert.equal(failure?.attrs["type"], "max_turns");
    assert.ok((failure?.attrs["message"] ?? "").length > 0);
    const md = readFileSync(summary, "utf8");
    assert.ok(md.startsWith("earlier step\n"), "appended, not overwritten");
    assert.match(md, /\| passes \| ✅ finished \| 1 \| [\d.]+ s \| `turnstream replay \S+` \|/);
    assert.match(md, /\| LOOP-MARK: read loop\.txt \| ❌ failed \(max_turns\) \| 1 \|/);
  } finally {
    await setup.dispose();
  }
});

test("--timeout with no worker: exit 4, the unended turns timed out in the JSON and the JUnit file; secrets scrubbed from every report", async () => {
  const space = testSpace();
  const redis = redisFor();
  const file = join(space.root, "stuck.jsonl");
  const junit = join(space.root, "stuck.xml");
  const summary = join(space.root, "summary.md");
  const secret = "s3cr3t-batch-value-123";
  // A label is not part of the job, so nothing refuses a secret in it: every report must scrub it.
  writeFileSync(
    file,
    [
      JSON.stringify({ prompt: "never runs", cwd: space.workspace(), label: `uses ${secret}` }),
      JSON.stringify({ prompt: "nor this", cwd: space.workspace() }),
    ].join("\n"),
  );
  try {
    const flags = [
      "--timeout",
      "1s",
      "--json",
      "--github",
      "--junit",
      junit,
      "--prefix",
      space.logPrefix,
      "--queue-prefix",
      space.queuePrefix,
    ];
    const run = await turnstream(["batch", file, ...flags], {
      BATCH_TEST_API_TOKEN: secret,
      GITHUB_STEP_SUMMARY: summary,
    });
    assert.equal(run.code, 4, run.stderr);
    for (const [what, text] of [
      ["output", run.stdout + run.stderr],
      ["junit", readFileSync(junit, "utf8")],
      ["summary", readFileSync(summary, "utf8")],
    ] as const) {
      assert.ok(!text.includes(secret), `${what} holds the secret`);
      assert.match(text, /\[REDACTED:BATCH_TEST_API_TOKEN\]/, what);
    }
    assert.match(run.stderr, /^::warning file=.*stuck\.jsonl,line=1,/m, "annotations go to stderr under --json");
    const said = onlyJson(run.stdout) as {
      outcome: string;
      turns: Array<{ status: string; outcome: string; message: string }>;
    };
    assert.equal(said.outcome, "timed_out");
    assert.ok(
      said.turns.every(
        (testContext) =>
          testContext.status === "unended" &&
          testContext.outcome === "timed_out" &&
          /did not end within --timeout \(1s\); it goes on running/.test(testContext.message),
      ),
    );
    const cases = readJunit(readFileSync(junit, "utf8"));
    assert.ok(cases.every((c) => child(c, "failure")?.attrs["type"] === "timed_out"));
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

test("a YAML batch file: a list of turns, each read like a JSONL line, a bad item named by its line", () => {
  const space = testSpace();
  try {
    const good = join(space.root, "turns.yaml");
    writeFileSync(
      good,
      [
        "- prompt: Say hello.",
        "  label: greeting",
        "- session: s-yaml",
        '  prompt: "Summarise {{file}}"',
        "  variables: { file: README.md }",
        "",
      ].join("\n"),
    );
    const turns = loadBatchFile(good, space.root);
    assert.deepEqual(
      turns.map((t) => ("input" in t ? [t.line, t.label, t.input.prompt, t.input.session, t.input.cwd] : t)),
      [
        [1, "greeting", "Say hello.", undefined, space.root],
        [3, "Summarise README.md", "Summarise {{file}}", "s-yaml", space.root],
      ],
    );
    const bad = join(space.root, "bad.yml");
    writeFileSync(bad, ["- prompt: fine", "- prompt: 42", "- just text", ""].join("\n"));
    assert.throws(
      () => loadBatchFile(bad, space.root),
      (thrown: unknown) =>
        thrown instanceof BatchFileError &&
        /line 2: .*prompt/.test(thrown.message) &&
        /line 3: must be an object/.test(thrown.message) &&
        !/line 1/.test(thrown.message),
    );
    const notList = join(space.root, "map.yaml");
    writeFileSync(notList, "prompt: one turn\n");
    assert.throws(() => loadBatchFile(notList, space.root), /must be a YAML list of turns/);
  } finally {
    space.cleanup();
  }
});

// ---- tenants ------------------------------------------------------------------------------------

test("reports carry each turn's tenant: a JUnit property, a summary column when a turn has one", () => {
  const report = batchReport("t.jsonl", new Date(), [
    turnResult({ line: 1, label: "acme's", tenant: "acme/api" }),
    turnResult({ line: 2, label: "nobody's" }),
  ]);
  const cases = readJunit(junitXml(report));
  assert.equal(property(cases[0]!, "tenant"), "acme/api");
  assert.equal(property(cases[1]!, "tenant"), undefined, "no tenant, no property");
  const summary = stepSummary(report);
  assert.match(summary, /^\| turn \| tenant \| status \| attempts \| time \| replay \|$/m);
  assert.match(summary, /^\| acme's \| acme\/api \| ✅ finished \| 1 \| /m);
  assert.match(summary, /^\| nobody's \| – \| ✅ finished \| 1 \| /m);
  const without = stepSummary(batchReport("t.jsonl", new Date(), [turnResult({ line: 1 })]));
  assert.match(without, /^\| turn \| status \| attempts \| time \| replay \|$/m, "no tenant, no column");
});

test("a batch entry's tenant goes to its enqueue (a later turn of its session inherits it) and into every report; a bad one is a bad line", async () => {
  const setup = await rig({ responses: [] });
  setup.worker({ concurrency: 2 });
  const file = join(setup.space.root, "tenants.jsonl");
  const junit = join(setup.space.root, "tenants.xml");
  const summary = join(setup.space.root, "summary.md");
  writeFileSync(
    file,
    [
      { session: "s-acme", prompt: "first", cwd: setup.ws, tenant: "acme/api", label: "acme first" },
      { session: "s-acme", prompt: "second", cwd: setup.ws, label: "acme second" },
      { prompt: "third", cwd: setup.ws, tenant: "globex", labels: { team: "web" }, label: "globex" },
      { prompt: "fourth", cwd: setup.ws, label: "nobody" },
    ]
      .map((entry) => JSON.stringify(entry))
      .join("\n"),
  );
  const bad = join(setup.space.root, "bad.jsonl");
  writeFileSync(
    bad,
    [
      JSON.stringify({ prompt: "fine", cwd: setup.ws, tenant: "acme/api" }),
      JSON.stringify({ prompt: "evil", cwd: setup.ws, tenant: "acme\u001b[2J<b>" }),
    ].join("\n"),
  );
  try {
    const refused = await turnstream(["batch", bad, "--prefix", setup.space.logPrefix]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /bad\.jsonl line 2: invalid turn: `tenant` a tenant is 1-100 characters/);
    assert.doesNotMatch(refused.stderr, /\u001b/, "the bad value is not echoed raw");

    const run = await turnstream(
      [
        "batch",
        file,
        "--json",
        "--github",
        "--junit",
        junit,
        "--prefix",
        setup.space.logPrefix,
        "--queue-prefix",
        setup.space.queuePrefix,
      ],
      { GITHUB_STEP_SUMMARY: summary },
      170_000,
    );
    assert.equal(run.code, 0, run.stderr + run.stdout);
    const said = onlyJson(run.stdout) as {
      turns: Array<{ label: string; session: string; turn: string; tenant?: string; status: string }>;
    };
    assert.deepEqual(
      said.turns.map((turn) => [turn.label, turn.tenant, turn.status]),
      [
        ["acme first", "acme/api", "finished"],
        ["acme second", "acme/api", "finished"],
        ["globex", "globex", "finished"],
        ["nobody", undefined, "finished"],
      ],
    );
    // What the log recorded for each turn is what the report says.
    for (const turn of said.turns) {
      const queued = (await setup.events(turn.session, turn.turn)).find((event) => event.kind === "turn.queued")!;
      assert.equal((queued.data as { tenant?: string }).tenant, turn.tenant, turn.label);
    }
    const cases = readJunit(readFileSync(junit, "utf8"));
    assert.deepEqual(
      cases.map((testcase) => property(testcase, "tenant")),
      ["acme/api", "acme/api", "globex", undefined],
    );
    const md = readFileSync(summary, "utf8");
    assert.match(md, /^\| acme second \| acme\/api \| ✅ finished \| 1 \| /m);
    assert.match(md, /^\| nobody \| – \| ✅ finished \| 1 \| /m);
  } finally {
    await setup.dispose();
  }
});
