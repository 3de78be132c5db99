// Every recorded CLI fixture (raw stdout of the real CLI, test/fixtures/cli/<name>.jsonl) parsed,
// classified and rendered, with expectations per fixture.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  bashCommands,
  classifyRun,
  createLineSplitter,
  foldMessages,
  parseItem,
  renderText,
  summarizeRun,
  toAiSdkMessages,
  unpairedToolCalls,
  type ParsedLine,
  type RunSummary,
  type Fold,
} from "../../src/protocol/index.ts";

const dir = join(import.meta.dirname, "../fixtures/cli");

interface Ctx {
  lines: ParsedLine[];
  sum: RunSummary;
  fold: Fold;
  text: string;
}

const toolNamed = (c: Ctx, name: string) => [...c.fold.toolCalls.values()].filter((t) => t.name === name);
const resultObjs = (c: Ctx) => c.fold.results;

const expectations: Record<string, (run: Ctx) => void> = {
  "plain-reply": (run) => {
    assert.equal(run.sum.errorKind, "ok");
    assert.equal(run.sum.toolCalls, 0);
    assert.ok(run.text.trim().length > 0);
  },
  "bash-call": (run) => {
    assert.equal(run.sum.errorKind, "ok");
    assert.ok(run.sum.bashCommands.length >= 1);
    assert.ok(run.text.includes("Tool Called: Bash("));
    assert.ok(run.text.includes("Tool Result"));
  },
  "read-call": (run) => {
    assert.equal(run.sum.errorKind, "ok");
    assert.ok(toolNamed(run, "Read").some((t) => t.result !== undefined && !t.result.isError));
  },
  "write-call": (run) => {
    assert.equal(run.sum.errorKind, "ok");
    assert.ok(toolNamed(run, "Write").some((t) => t.result !== undefined && !t.result.isError));
  },
  "edit-call": (run) => {
    assert.equal(run.sum.errorKind, "ok");
    assert.ok(toolNamed(run, "Edit").some((t) => t.result !== undefined));
  },
  "failing-tool": (run) => {
    assert.ok([...run.fold.toolCalls.values()].some((t) => t.result?.isError === true));
    assert.ok(run.text.includes("Tool Result (error): "));
    const ai = toAiSdkMessages(run.lines);
    assert.ok(ai.some((m) => m.role === "tool" && m.content.some((p) => p.output.type === "error-text")));
  },
  "three-tools-one-message": (run) => {
    assert.equal(run.sum.errorKind, "ok");
    const message = run.fold.messages.find((x) => x.toolCalls.length >= 3);
    assert.ok(message, "one assistant message carries three tool calls");
    assert.ok(message.lineIndexes.length >= 3, "folded from per-block lines");
    assert.ok(message.toolCalls.every((t) => t.result !== undefined));
    const ai = toAiSdkMessages(run.lines);
    assert.ok(ai.some((x) => x.role === "assistant" && x.content.filter((p) => p.type === "tool-call").length >= 3));
  },
  thinking: (run) => {
    assert.equal(run.sum.errorKind, "ok");
    const blocks = run.fold.messages.flatMap((m) => m.blocks).filter((b) => b["type"] === "thinking");
    assert.ok(blocks.length >= 1, "a thinking block was printed");
    for (const block of blocks) {
      const thought = block["thinking"];
      if (typeof thought === "string" && thought.length > 0)
        assert.ok(!run.text.includes(thought), "thinking is never rendered");
    }
  },
  "partial-messages": (run) => {
    assert.equal(run.sum.errorKind, "ok");
    assert.ok((run.sum.byType["stream_event"] ?? 0) > 0);
  },
  "resume-turn1": (c) => assert.equal(c.sum.errorKind, "ok"),
  "resume-turn2": (run) => {
    assert.equal(run.sum.errorKind, "ok");
    const first = summarizeRun(load("resume-turn1"));
    assert.equal(run.sum.sessionId, first.sessionId, "resume continues the same session");
  },
  "lost-session": (run) => {
    assert.equal(run.sum.errorKind, "lost_session");
    assert.equal(run.sum.byType["system/init"] ?? 0, 0);
  },
  "error-401": (c) => apiError(c, "auth"),
  "error-429": (c) => apiError(c, "rate_limit"),
  "error-529": (c) => apiError(c, "overloaded"),
  "max-turns": (c) => assert.equal(c.sum.errorKind, "max_turns"),
  "permission-denied": (c) =>
    assert.ok(resultObjs(c).some((r) => Array.isArray(r["permission_denials"]) && r["permission_denials"].length > 0)),
  "hook-deny": (c) =>
    assert.ok(resultObjs(c).some((r) => Array.isArray(r["permission_denials"]) && r["permission_denials"].length > 0)),
  "background-subagent": (run) => {
    assert.ok(run.sum.results.length >= 2, "two result lines in one run");
    assert.ok(run.fold.subagents.size >= 1, "subagent lines grouped under their parent tool call");
  },
  "sigterm-midstream": (run) => {
    assert.equal(run.sum.errorKind, "no_result");
    assert.equal(run.sum.results.length, 0);
  },
};

function apiError(run: Ctx, kind: string): void {
  assert.equal(run.sum.errorKind, kind);
  const last = run.sum.results.at(-1)!;
  assert.equal(last.subtype, "success");
  assert.equal(last.isError, true);
}

function load(name: string): ParsedLine[] {
  const bytes = readFileSync(join(dir, `${name}.jsonl`));
  const splitter = createLineSplitter();
  return [...splitter.push(bytes), ...splitter.end()].map(parseItem);
}

const recorded = existsSync(dir)
  ? readdirSync(dir)
      .filter((f) => f.endsWith(".jsonl"))
      .map((f) => f.slice(0, -6))
  : [];

test("every recorded fixture has expectations here", () => {
  assert.deepEqual(
    recorded.filter((n) => !(n in expectations)),
    [],
  );
});

for (const name of Object.keys(expectations)) {
  test(`fixture ${name}`, () => {
    assert.ok(
      existsSync(join(dir, `${name}.jsonl`)),
      `test/fixtures/cli/${name}.jsonl is not recorded yet (npm run fixtures)`,
    );
    const lines = load(name);
    assert.ok(lines.length > 0);
    const sum = summarizeRun(lines);
    assert.equal(sum.invalid, 0);
    assert.equal(sum.truncated, 0);
    const unknown = lines.filter((p) => p.category === "unknown").map((p) => p.type);
    assert.deepEqual(unknown, [], "every line type the CLI printed has a schema");
    if ((sum.byType["system/init"] ?? 0) > 0) assert.equal(sum.cliVersion, "2.1.332");
    assert.equal(classifyRun(lines), sum.errorKind);
    assert.deepEqual(bashCommands(lines), sum.bashCommands);
    const fold = foldMessages(lines);
    assert.deepEqual(
      unpairedToolCalls(fold).map((t) => t.id),
      sum.unpairedToolCalls.map((t) => t.id),
    );
    // Any chunking yields the same lines.
    const bytes = readFileSync(join(dir, `${name}.jsonl`));
    const sp = createLineSplitter();
    const chunked: ParsedLine[] = [];
    for (let offset = 0; offset < bytes.length; offset += 997)
      chunked.push(...sp.push(bytes.subarray(offset, offset + 997)).map(parseItem));
    chunked.push(...sp.end().map(parseItem));
    assert.deepEqual(
      chunked.map((p) => p.raw),
      lines.map((p) => p.raw),
    );
    // Raw text is exact: each record holds its line of the file unchanged.
    const fileLines = bytes
      .toString("utf8")
      .split("\n")
      .map((l) => l.replace(/\r$/, ""))
      .filter((l) => l.trim() !== "");
    assert.deepEqual(
      lines.map((p) => p.raw),
      fileLines,
    );
    expectations[name]!({ lines, sum, fold, text: renderText(fold) });
  });
}
