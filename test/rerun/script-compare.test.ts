// The pure parts over recorded fixture logs: a logged turn becomes a script (responses in order, ids
// and inputs kept, API errors as scripted errors, tool-result digests on the follow-up), a run
// compared with itself matches and a changed tool result is named at its step; the scripted server
// answers a request the script cannot with the divergence error.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Envelope } from "../../src/log/index.ts";
import { compareRuns, recordedTurns, renderComparison, scriptFromTurns } from "../../src/rerun/index.ts";
import { normaliseRunText, startModelServer, toolResultDigest } from "../../src/testing/index.ts";

const log = (name: string): Envelope[] =>
  readFileSync(join(import.meta.dirname, "..", "fixtures", "logs", `${name}.jsonl`), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Envelope);

test("a logged tool turn becomes its responses in order, from the accepted attempt, with the tool result's digest on the follow-up", () => {
  const [turn] = recordedTurns(log("crash-retry"), "1");
  assert.equal(turn!.attempt, 2, "the attempt turn.finished names");
  const script = scriptFromTurns([turn!]);
  assert.equal(script.responses.length, 2);
  const first = script.responses[0] as { content: Array<Record<string, unknown>> };
  assert.deepEqual(
    first.content.map((b) => b["type"]),
    ["text", "tool_use"],
  );
  assert.equal(first.content[1]!["id"], "toolu_fXCmLz3obAk5ZnBY");
  assert.deepEqual(first.content[1]!["input"], {
    command: "echo fixture-bash-output",
    description: "Print a greeting",
  });
  const second = script.responses[1] as { expect?: { toolResults: unknown[] } };
  assert.deepEqual(second.expect?.toolResults, [
    {
      toolUseId: "toolu_fXCmLz3obAk5ZnBY",
      name: "Bash",
      sha256: toolResultDigest("fixture-bash-output"),
      isError: false,
    },
  ]);
  assert.equal(script.exhausted, "error");
});

test("API errors the CLI reported become scripted errors of the same status", () => {
  const turns = recordedTurns(log("api-errors"));
  assert.deepEqual(
    turns.map((t) => t.ending.errorKind),
    ["rate_limit", "auth"],
  );
  const statuses = turns.map(
    (t) => (scriptFromTurns([t]).responses[0] as { error: { status: number; type: string } }).error,
  );
  assert.deepEqual(
    statuses.map((e) => [e.status, e.type]),
    [
      [429, "rate_limit_error"],
      [401, "authentication_error"],
    ],
  );
});

test("a run compared with itself matches; a changed tool result is named at its step with both texts", () => {
  const turns = recordedTurns(log("crash-retry"), "1");
  assert.equal(compareRuns(turns, turns).match, true);
  const changed = {
    ...turns[0]!,
    lines: turns[0]!.lines.map((line) =>
      line
        .replace('"content": "fixture-bash-output"', '"content": "something else"')
        .replace('"content":"fixture-bash-output"', '"content":"something else"'),
    ),
  };
  const comparison = compareRuns(turns, [changed]);
  assert.equal(comparison.match, false);
  assert.equal(comparison.turns[0]!.partedAt, 1);
  assert.equal(comparison.turns[0]!.differences[0]!.what, "tool result of Bash");
  assert.match(
    renderComparison(comparison),
    /step 1: tool result of Bash\n    - recorded: "fixture-bash-output"\n    \+ re-run: +"something else"/,
  );
});

test("normalisation: the cwd, UUIDs, tool-use ids and times of a run never count as a change", () => {
  const text =
    "at /w/a/ws/x.txt session 4dc4df88-90da-4a19-a513-54d43f98195f id toolu_AbC-12 on 2026-12-02T19:47:13.308Z";
  assert.equal(normaliseRunText(text, "/w/a/ws"), "at <cwd>/x.txt session <uuid> id <toolu> on <time>");
});

test("the scripted server answers a follow-up whose tool result differs, and a request beyond the script, with a divergence error", async () => {
  const expect = {
    toolResults: [{ toolUseId: "toolu_1", name: "Read", sha256: toolResultDigest("alpha"), isError: false }],
  };
  const server = await startModelServer({
    script: { exhausted: "error", responses: [{ content: [{ type: "text", text: "ok" }], expect }] },
  });
  try {
    const ask = (text: string) =>
      fetch(`${server.url}/v1/messages`, {
        method: "POST",
        body: JSON.stringify({
          model: "m",
          tools: [{ name: "Read" }],
          messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: text }] }],
        }),
      });
    const differs = await ask("beta");
    assert.equal(differs.status, 400);
    assert.match(
      ((await differs.json()) as { error: { message: string } }).error.message,
      /request 1 \(for response 1\): the result of tool call toolu_1 \(Read\) differs from the recording's/,
    );
    const beyond = await ask("alpha");
    assert.equal(beyond.status, 400);
    assert.match(server.requests()[1]!.diverged ?? "", /more requests than the 1 response/);
  } finally {
    await server.close();
  }
});
