// The reducer's hand-written system/init check against the protocol's SystemInitSchema: it never
// accepts what zod rejects, and every recorded init line takes it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { parseLine, SystemInitSchema } from "../../src/protocol/index.ts";
import { fastInitCheck } from "../../src/projector/reduce.ts";

const logsDir = join(import.meta.dirname, "..", "fixtures", "logs");
const initLines: string[] = readdirSync(logsDir)
  .filter((f) => f.endsWith(".jsonl"))
  .flatMap((f) => readFileSync(join(logsDir, f), "utf8").split("\n").filter((l) => l !== ""))
  .map((l) => JSON.parse(l) as { kind: string; data: { raw?: string } })
  .filter((e) => e.kind === "cli.line" && typeof e.data.raw === "string" && e.data.raw.includes('"subtype":"init"'))
  .map((e) => e.data.raw!);

test("every recorded system/init line takes the fast check, as parseLine knows it", () => {
  assert.ok(initLines.length >= 10);
  for (const raw of initLines) {
    const o = JSON.parse(raw) as Record<string, unknown>;
    assert.equal(fastInitCheck(o), true);
    assert.equal(parseLine(raw).category, "known");
  }
});

const junk = fc.oneof(fc.anything(), fc.constantFrom(undefined, null, "", 0, [], {}, ["a", 1], [null], true));
const maybe = <T>(good: fc.Arbitrary<T>): fc.Arbitrary<unknown> => fc.oneof({ weight: 12, arbitrary: good }, { weight: 1, arbitrary: junk });
const candidate = fc.record(
  {
    type: maybe(fc.constant("system")),
    subtype: maybe(fc.constantFrom("init", "init ", "status")),
    session_id: maybe(fc.string()),
    uuid: maybe(fc.string()),
    cwd: maybe(fc.string()),
    model: maybe(fc.string()),
    tools: maybe(fc.array(fc.string(), { maxLength: 5 })),
    permissionMode: maybe(fc.string()),
    claude_code_version: maybe(fc.string()),
    apiKeySource: maybe(fc.string()),
    mcp_servers: fc.anything(),
  },
  { requiredKeys: [] },
);

test("property: the fast init check never accepts what SystemInitSchema rejects", () => {
  let vouched = 0;
  let rejected = 0;
  fc.assert(
    fc.property(fc.oneof({ weight: 5, arbitrary: candidate }, { weight: 1, arbitrary: fc.dictionary(fc.string(), fc.anything()) }), (o) => {
      const ok = fastInitCheck(o as Record<string, unknown>);
      const zod = SystemInitSchema.safeParse(o).success;
      if (ok) {
        vouched++;
        assert.ok(zod, `fast init check accepted what zod rejects: ${JSON.stringify(o)?.slice(0, 300)}`);
      }
      if (!zod) rejected++;
    }),
    { numRuns: 3000 },
  );
  assert.ok(vouched > 100, `only ${vouched} values took the fast path`);
  assert.ok(rejected > 100, `only ${rejected} values were invalid`);
});
