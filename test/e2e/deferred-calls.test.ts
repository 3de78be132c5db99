// What the pinned CLI does with a PreToolUse hook that answers `defer`, measured with the real binary
// against the scripted model server (test/fixtures/FACTS.md, "Deferred tool calls"). Supervised turns
// will park on a deferred call and resume it later; each test pins one edge, so a CLI upgrade that
// changes it fails here before it breaks a parked turn.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hermeticEnv, startModelServer, type ModelServer, type ScriptResponse } from "../../src/testing/index.ts";
import { resultsOf, runClaude, type ClaudeRun } from "../testing/_claude.ts";

type Decision = "allow" | "deny" | "defer";
/** What the hook answers: the first `when` needle found in the call's input decides, else `otherwise`. */
interface Rules {
  when?: Record<string, Decision>;
  otherwise?: Decision;
}
interface HookCall {
  tool_name: string;
  tool_use_id: string;
  tool_input: Record<string, unknown>;
  agent_id?: string;
  decision: Decision;
}
type Line = Record<string, any>;

/** The CLI these facts were measured with; the first test fails when the pinned binary is another. */
const CLI_VERSION = "2.1.332";

/**
 * One session of the real CLI with a PreToolUse hook (a node script in a temp dir, for every tool)
 * that logs each call it is asked about and answers from a rules file the test rewrites between runs.
 */
interface Rig {
  cwd: string;
  server: ModelServer;
  /** Runs the CLI once: the first run with `prompt`, later ones `--resume` the session with an empty stdin. */
  run(rules: Rules): Promise<ClaudeRun>;
  hookCalls(): HookCall[];
  /** The main session file's lines, parsed. */
  sessionLines(): Line[];
  sessionFilePath(): string;
  sessionId(): string;
}

async function withRig(responses: ScriptResponse[], body: (rig: Rig) => Promise<void>): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), "ts-deferred-"));
  const cwd = join(root, "work");
  mkdirSync(cwd);
  const rulesFile = join(root, "rules.json");
  const hookLog = join(root, "hook-calls.jsonl");
  const hook = join(root, "hook.mjs");
  writeFileSync(
    hook,
    `#!${process.execPath}
import { appendFileSync, readFileSync } from "node:fs";
const input = JSON.parse(readFileSync(0, "utf8"));
const rules = JSON.parse(readFileSync(${JSON.stringify(rulesFile)}, "utf8"));
const text = JSON.stringify(input.tool_input ?? {});
const hit = Object.entries(rules.when ?? {}).find(([needle]) => text.includes(needle));
const decision = hit ? hit[1] : (rules.otherwise ?? "allow");
appendFileSync(${JSON.stringify(hookLog)}, JSON.stringify({ ...input, decision }) + "\\n");
process.stdout.write(JSON.stringify({ hookSpecificOutput: {
  hookEventName: "PreToolUse", permissionDecision: decision, permissionDecisionReason: "rules say " + decision } }));
`,
    { mode: 0o755 },
  );
  const settings = join(root, "settings.json");
  writeFileSync(
    settings,
    JSON.stringify({ hooks: { PreToolUse: [{ matcher: "*", hooks: [{ type: "command", command: hook }] }] } }),
  );
  const server = await startModelServer({ script: { responses } });
  // Default permission mode, as a supervised turn runs: the hook alone lets a call through.
  const hermetic = hermeticEnv({ baseUrl: server.url, root: join(root, "cli") });
  let session: string | undefined;
  const projects = join(hermetic.dirs.config, "projects");
  const sessionFilePath = (): string => {
    const [slug] = readdirSync(projects);
    return join(projects, slug!, `${session}.jsonl`);
  };
  const rig: Rig = {
    cwd,
    server,
    async run(rules) {
      writeFileSync(rulesFile, JSON.stringify(rules));
      const resume = session === undefined ? [] : ["--resume", session];
      const run = await runClaude({
        baseUrl: server.url,
        prompt: session === undefined ? "Do the task." : "",
        hermetic,
        cwd,
        args: ["--settings", settings, ...resume],
        timeoutMs: 120_000,
      });
      session ??= run.lines.find((line) => line["type"] === "system" && line["subtype"] === "init")?.["session_id"];
      return run;
    },
    hookCalls: () =>
      existsSync(hookLog)
        ? readFileSync(hookLog, "utf8")
            .split("\n")
            .filter(Boolean)
            .map((line) => JSON.parse(line) as HookCall)
        : [],
    sessionLines: () =>
      readFileSync(sessionFilePath(), "utf8")
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Line),
    sessionFilePath,
    sessionId: () => session!,
  };
  try {
    await body(rig);
  } finally {
    await server.close();
    rmSync(root, { recursive: true, force: true });
  }
}

const text = (words: string) => ({ type: "text" as const, text: words });
const bash = (command: string) => ({
  type: "tool_use" as const,
  name: "Bash",
  input: { command, description: "append a marker" },
});
/** A command that appends `word` to `dir`/`file`: the file's text counts how often it ran. */
const append = (dir: string, word: string, file: string): string => `echo ${word} >> ${join(dir, file)}`;

const onlyResult = (run: ClaudeRun): Line => {
  const results = resultsOf(run);
  assert.equal(results.length, 1, `one result line: ${JSON.stringify(results)}`);
  return results[0]!;
};
const toolResults = (run: ClaudeRun): Line[] =>
  run.lines
    .filter((line) => line["type"] === "user" && Array.isArray(line["message"]?.["content"]))
    .flatMap((line) => line["message"]["content"] as Line[])
    .filter((block) => block["type"] === "tool_result");
const mainRequests = (server: ModelServer) => server.requests().filter((request) => request.kind === "messages");

/** A folder for the commands' marker files, made before the rig so the script can name it. */
function scriptDir(context: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), "ts-deferred-target-"));
  context.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test("the pinned CLI is the version these facts were measured with", () => {
  const manifest = join(import.meta.dirname, "../../node_modules/@anthropic-ai/claude-code/package.json");
  const { version } = JSON.parse(readFileSync(manifest, "utf8")) as { version: string };
  assert.equal(version, CLI_VERSION, "re-measure the deferred-call facts (test/fixtures/FACTS.md) and update them");
});

test(`${CLI_VERSION}: defer ends the run at once; resume asks the hook again for the same call, allow runs it once`, async (context) => {
  const target = scriptDir(context);
  const risky = append(target, "RISKY", "ran.txt");
  await withRig([{ content: [text("running it"), bash(risky)] }, { content: [text("finished")] }], async (rig) => {
    const deferred = await rig.run({ when: { RISKY: "defer" } });
    assert.equal(deferred.code, 0, deferred.stderr);
    const result = onlyResult(deferred);
    const [call] = rig.hookCalls();
    assert.equal(call?.decision, "defer");
    assert.match(call!.tool_use_id, /^toolu_/);
    assert.deepEqual(
      {
        subtype: result["subtype"],
        is_error: result["is_error"],
        terminal_reason: result["terminal_reason"],
        stop_reason: result["stop_reason"],
        result: result["result"],
        num_turns: result["num_turns"],
        permission_denials: result["permission_denials"],
        deferred_tool_use: result["deferred_tool_use"],
      },
      {
        subtype: "success",
        is_error: false,
        terminal_reason: "tool_deferred",
        stop_reason: "tool_deferred",
        result: "",
        num_turns: 1,
        permission_denials: [],
        deferred_tool_use: {
          id: call!.tool_use_id,
          name: "Bash",
          input: { command: risky, description: "append a marker" },
        },
      },
    );
    assert.equal(resultsOf(deferred).at(-1), deferred.lines.at(-1), "the result is the last line");
    assert.equal(existsSync(join(target, "ran.txt")), false, "the deferred command did not run");
    assert.deepEqual(toolResults(deferred), [], "no tool_result for the deferred call");
    assert.equal(mainRequests(rig.server).length, 1, "no request after the deferral");

    // The session file: the tool_use, a hook_deferred_tool marker naming the call, no tool_result, a cost-state.
    const lines = rig.sessionLines();
    const marker = lines.find((line) => line["attachment"]?.["type"] === "hook_deferred_tool");
    assert.deepEqual(
      {
        toolUseID: marker?.["attachment"]["toolUseID"],
        toolName: marker?.["attachment"]["toolName"],
        toolInput: marker?.["attachment"]["toolInput"],
        hookEvent: marker?.["attachment"]["hookEvent"],
        permissionMode: marker?.["attachment"]["permissionMode"],
      },
      {
        toolUseID: call!.tool_use_id,
        toolName: "Bash",
        toolInput: { command: risky, description: "append a marker" },
        hookEvent: "PreToolUse",
        permissionMode: "default",
      },
    );
    assert.ok(
      lines.some(
        (line) =>
          line["type"] === "assistant" &&
          (line["message"]["content"] as Line[]).some((block) => block["id"] === call!.tool_use_id),
      ),
    );
    assert.ok(!JSON.stringify(lines).includes(`"tool_use_id":"${call!.tool_use_id}"`), "no tool_result in the file");
    assert.equal(lines.filter((line) => line["type"] === "cost-state").length, 1);

    const resumed = await rig.run({ otherwise: "allow" });
    assert.equal(resumed.code, 0, resumed.stderr);
    const calls = rig.hookCalls();
    assert.equal(calls.length, 2, "the hook was asked once more, for the deferred call only");
    assert.deepEqual(
      {
        id: calls[1]!.tool_use_id,
        name: calls[1]!.tool_name,
        input: calls[1]!.tool_input,
        decision: calls[1]!.decision,
      },
      { id: call!.tool_use_id, name: "Bash", input: call!.tool_input, decision: "allow" },
    );
    assert.equal(readFileSync(join(target, "ran.txt"), "utf8"), "RISKY\n", "the command ran exactly once");
    const after = onlyResult(resumed);
    assert.equal(after["terminal_reason"], "completed");
    assert.equal(after["result"], "finished");
    assert.equal(after["is_error"], false);
    assert.equal(after["deferred_tool_use"], undefined);
    assert.equal(after["session_id"], rig.sessionId());
    // The resumed run opens with command_lifecycle, and the tool runs before the CLI prints its init.
    const kinds = resumed.lines.map((line) => (line["subtype"] ? `${line["type"]}/${line["subtype"]}` : line["type"]));
    assert.equal(resumed.lines[0]!["type"], "command_lifecycle");
    assert.equal(resumed.lines[0]!["state"], "started");
    assert.equal(resumed.lines.at(-1)!["type"], "command_lifecycle");
    assert.equal(resumed.lines.at(-1)!["state"], "completed");
    assert.ok(kinds.indexOf("user") < kinds.indexOf("system/init"), kinds.join(","));
    assert.deepEqual(
      toolResults(resumed).map((block) => [block["tool_use_id"], block["content"], block["is_error"]]),
      [[call!.tool_use_id, "(Bash completed with no output)", false]],
    );
    // The model gets the tool_result plus a meta prompt the CLI adds.
    const followUp = mainRequests(rig.server).at(-1)!;
    assert.equal(followUp.lastUserText, "(Bash completed with no output)\nContinue from where you left off.");
    const meta = rig
      .sessionLines()
      .find((line) => line["message"]?.["content"] === "Continue from where you left off.");
    assert.equal(meta?.["isMeta"], true);

    // Nothing is left to resume: an empty-stdin resume now is refused.
    const again = await rig.run({ otherwise: "allow" });
    assert.equal(again.code, 1);
    assert.match(again.stderr, /No deferred tool marker found in the resumed session/);
    assert.deepEqual(again.lines, []);
    assert.equal(readFileSync(join(target, "ran.txt"), "utf8"), "RISKY\n");
  });
});

test(`${CLI_VERSION}: with two calls in one message, the other call runs in the deferring run, before or after`, async (context) => {
  for (const riskyFirst of [false, true]) {
    const target = scriptDir(context);
    const risky = bash(append(target, "RISKY", "ran.txt"));
    const safe = bash(append(target, "safe", "safe.txt"));
    const calls = riskyFirst ? [risky, safe] : [safe, risky];
    await withRig([{ content: calls }, { content: [text("finished")] }], async (rig) => {
      const deferred = await rig.run({ when: { RISKY: "defer" } });
      assert.equal(deferred.code, 0, deferred.stderr);
      const result = onlyResult(deferred);
      assert.equal(result["terminal_reason"], "tool_deferred");
      assert.equal(result["deferred_tool_use"]["input"]["command"], risky.input.command);
      assert.equal(readFileSync(join(target, "safe.txt"), "utf8"), "safe\n", "the other call ran before the exit");
      assert.equal(existsSync(join(target, "ran.txt")), false);
      assert.deepEqual(
        toolResults(deferred).map((block) => block["content"]),
        ["(Bash completed with no output)"],
        "the deferring run printed the other call's tool_result",
      );
      assert.deepEqual(
        rig.hookCalls().map((call) => call.decision),
        riskyFirst ? ["defer", "allow"] : ["allow", "defer"],
        "the hook is asked in message order; a defer does not stop the calls after it",
      );

      const resumed = await rig.run({ otherwise: "allow" });
      assert.equal(resumed.code, 0, resumed.stderr);
      assert.equal(onlyResult(resumed)["terminal_reason"], "completed");
      assert.equal(rig.hookCalls().length, 3, "on resume only the deferred call is asked again");
      assert.equal(rig.hookCalls()[2]!.tool_input["command"], risky.input.command);
      assert.equal(readFileSync(join(target, "safe.txt"), "utf8"), "safe\n", "the other call did not run again");
      assert.equal(readFileSync(join(target, "ran.txt"), "utf8"), "RISKY\n");
      assert.equal(
        mainRequests(rig.server).at(-1)!.lastUserText,
        "(Bash completed with no output)\n(Bash completed with no output)\nContinue from where you left off.",
        "the follow-up request carries both results",
      );
    });
  }
});

test(`${CLI_VERSION}: a deny on the resumed call gives the model the hook's reason as an error tool_result`, async (context) => {
  const target = scriptDir(context);
  const risky = append(target, "RISKY", "ran.txt");
  await withRig([{ content: [bash(risky)] }, { content: [text("it was refused")] }], async (rig) => {
    const deferred = await rig.run({ when: { RISKY: "defer" } });
    assert.equal(onlyResult(deferred)["terminal_reason"], "tool_deferred");
    const resumed = await rig.run({ otherwise: "deny" });
    assert.equal(resumed.code, 0, resumed.stderr);
    const id = rig.hookCalls()[0]!.tool_use_id;
    assert.deepEqual(rig.hookCalls()[1]!.tool_use_id, id);
    assert.equal(existsSync(join(target, "ran.txt")), false, "the denied command never ran");
    const [denied] = toolResults(resumed);
    assert.deepEqual(
      { id: denied?.["tool_use_id"], content: denied?.["content"], isError: denied?.["is_error"] },
      { id, content: "PreToolUse:Bash hook error: rules say deny", isError: true },
    );
    const deniedLine = resumed.lines.find((line) => line["type"] === "user");
    assert.deepEqual(deniedLine?.["tool_result_meta"], [
      {
        id,
        non_execution_kind: "permission-rule",
        permission_decision: { decision: "reject", source: "hook", reason_type: "hook" },
      },
    ]);
    assert.equal(
      mainRequests(rig.server).at(-1)!.lastUserText,
      "PreToolUse:Bash hook error: rules say deny\nContinue from where you left off.",
    );
    const result = onlyResult(resumed);
    assert.deepEqual(
      {
        subtype: result["subtype"],
        is_error: result["is_error"],
        terminal_reason: result["terminal_reason"],
        result: result["result"],
        permission_denials: result["permission_denials"],
      },
      {
        subtype: "success",
        is_error: false,
        terminal_reason: "completed",
        result: "it was refused",
        permission_denials: [
          { tool_name: "Bash", tool_use_id: id, tool_input: { command: risky, description: "append a marker" } },
        ],
      },
    );
  });
});

test(`${CLI_VERSION}: a defer inside a subagent does not end the run; the call is dropped and cannot be resumed`, async (context) => {
  for (const background of [false, true]) {
    const target = scriptDir(context);
    const risky = append(target, "RISKY", "ran.txt");
    const agentCall = {
      type: "tool_use" as const,
      name: "Agent",
      input: {
        description: "Do it",
        prompt: "SUBAGENT-TASK: run the risky command.",
        subagent_type: "general-purpose",
        run_in_background: background,
      },
    };
    const responses: ScriptResponse[] = [
      { content: [agentCall] },
      { match: "SUBAGENT-TASK", content: [bash(risky)] },
      // Whatever the subagent or the main loop asks next: the subagent's own follow-up never comes.
      { match: "Async agent launched", content: [text("waiting for the agent")] },
      { content: [text("finished")] },
    ];
    await withRig(responses, async (rig) => {
      const run = await rig.run({ when: { RISKY: "defer" } });
      assert.equal(run.code, 0, run.stderr);
      const calls = rig.hookCalls();
      assert.deepEqual(
        calls.map((call) => [call.tool_name, call.decision, call.agent_id === undefined]),
        [
          ["Agent", "allow", true],
          ["Bash", "defer", false],
        ],
        "the hook saw the subagent's call, with its agent_id",
      );
      const results = resultsOf(run);
      assert.ok(results.length >= 1);
      for (const result of results) {
        assert.equal(result["terminal_reason"], "completed", JSON.stringify(result));
        assert.equal(result["deferred_tool_use"], undefined);
      }
      assert.equal(existsSync(join(target, "ran.txt")), false, "the deferred call never ran");
      const done = run.lines.find((line) => line["subtype"] === "task_notification");
      assert.equal(done?.["status"], "completed", "the subagent counts as completed");
      if (!background) {
        const handBack = toolResults(run).find((block) => block["tool_use_id"] === calls[0]!.tool_use_id);
        assert.match(JSON.stringify(handBack?.["content"]), /Subagent completed but returned no output/);
      }
      // The subagent's transcript has the tool_use and no tool_result for it.
      const subagents = join(rig.sessionFilePath().replace(/\.jsonl$/, ""), "subagents");
      const [transcript] = readdirSync(subagents);
      const subLines = readFileSync(join(subagents, transcript!), "utf8").trim().split("\n");
      assert.ok(subLines.some((line) => line.includes(calls[1]!.tool_use_id)));
      assert.ok(!subLines.some((line) => line.includes('"tool_result"')));

      const resumed = await rig.run({ otherwise: "allow" });
      assert.equal(resumed.code, 1);
      assert.match(resumed.stderr, /No deferred tool marker found in the resumed session/);
      assert.equal(rig.hookCalls().length, 2);
      assert.equal(existsSync(join(target, "ran.txt")), false);
    });
  }
});

test(`${CLI_VERSION}: a later call in the resumed turn can defer again, and that resume finishes the turn`, async (context) => {
  const target = scriptDir(context);
  const first = append(target, "RISKY1", "ran.txt");
  const second = append(target, "RISKY2", "ran.txt");
  await withRig(
    [{ content: [bash(first)] }, { content: [bash(second)] }, { content: [text("finished")] }],
    async (rig) => {
      const one = await rig.run({ when: { RISKY1: "defer" } });
      const two = await rig.run({ when: { RISKY2: "defer" } });
      const three = await rig.run({ otherwise: "allow" });
      assert.deepEqual([one.code, two.code, three.code], [0, 0, 0], [one.stderr, two.stderr, three.stderr].join("\n"));
      const results = [one, two, three].map(onlyResult);
      assert.deepEqual(
        results.map((result) => [result["terminal_reason"], result["deferred_tool_use"]?.["input"]["command"]]),
        [
          ["tool_deferred", first],
          ["tool_deferred", second],
          ["completed", undefined],
        ],
      );
      assert.notEqual(results[0]!["deferred_tool_use"]["id"], results[1]!["deferred_tool_use"]["id"]);
      assert.deepEqual(
        rig.hookCalls().map((call) => [call.tool_input["command"], call.decision]),
        [
          [first, "defer"],
          [first, "allow"],
          [second, "defer"],
          [second, "allow"],
        ],
      );
      assert.equal(readFileSync(join(target, "ran.txt"), "utf8"), "RISKY1\nRISKY2\n");
      assert.equal(new Set(results.map((result) => result["session_id"])).size, 1, "one session throughout");
    },
  );
});

test(`${CLI_VERSION}: total_cost_usd runs on across deferral and resumes; usage is each run's own`, async (context) => {
  const target = scriptDir(context);
  await withRig(
    [
      { content: [bash(append(target, "RISKY1", "ran.txt"))] },
      { content: [bash(append(target, "RISKY2", "ran.txt"))] },
      { content: [text("finished")] },
    ],
    async (rig) => {
      const runs = [
        await rig.run({ when: { RISKY1: "defer" } }),
        await rig.run({ when: { RISKY2: "defer" } }),
        await rig.run({ otherwise: "allow" }),
      ];
      const results = runs.map(onlyResult);
      const perRequest = 0.000168; // 12 input + 6 output tokens of claude-opus-5-5 at list price
      assert.deepEqual(
        results.map((result) => Number((result["total_cost_usd"] as number).toFixed(9))),
        [perRequest, 2 * perRequest, 3 * perRequest].map((cost) => Number(cost.toFixed(9))),
        "a running total of the session, not the run's cost",
      );
      assert.deepEqual(
        results.map((result) => [result["usage"]["input_tokens"], result["usage"]["output_tokens"]]),
        [
          [12, 6],
          [12, 6],
          [12, 6],
        ],
        "usage is the run's own (one request each)",
      );
      assert.deepEqual(
        results.map((result) => result["modelUsage"]["claude-opus-5-5"]["inputTokens"]),
        [12, 24, 36],
        "modelUsage runs on like the cost",
      );
      const costStates = rig.sessionLines().filter((line) => line["type"] === "cost-state");
      assert.deepEqual(
        costStates.map((line) => Number((line["totalCostUSD"] as number).toFixed(9))),
        [perRequest, 2 * perRequest, 3 * perRequest].map((cost) => Number(cost.toFixed(9))),
        "each exit writes the running total into the session file",
      );
    },
  );
});

test(`${CLI_VERSION}: the resumed call's input comes from the session file, so an edited file changes what runs`, async (context) => {
  const target = scriptDir(context);
  const risky = append(target, "RISKY", "ran.txt");
  const forged = append(target, "FORGED", "ran.txt");
  await withRig([{ content: [bash(risky)] }, { content: [text("finished")] }], async (rig) => {
    await rig.run({ when: { RISKY: "defer" } });
    // Someone with the (archived, restored) session file rewrites the pending call everywhere it appears.
    const file = rig.sessionFilePath();
    writeFileSync(file, readFileSync(file, "utf8").replaceAll(risky, forged));
    const resumed = await rig.run({ when: { FORGED: "allow" }, otherwise: "deny" });
    assert.equal(resumed.code, 0, resumed.stderr);
    const [first, second] = rig.hookCalls();
    assert.equal(second!.tool_use_id, first!.tool_use_id, "same id");
    assert.equal(second!.tool_input["command"], forged, "the hook is asked about the edited input");
    assert.equal(readFileSync(join(target, "ran.txt"), "utf8"), "FORGED\n", "and the edited input is what ran");
  });
});
