// The read path's hand-written envelope check against envelopeSchema: whatever the fast check
// vouches for, zod accepts too, with the same output; what it does not vouch for is decided by zod.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { checkEnvelope, envelopeSchema, eventInputSchema, fastEnvelope, fastEventInput } from "../../src/log/envelope.ts";

const logsDir = join(import.meta.dirname, "..", "fixtures", "logs");
const recorded: Record<string, unknown>[] = readdirSync(logsDir)
  .filter((f) => f.endsWith(".jsonl"))
  .flatMap((f) => readFileSync(join(logsDir, f), "utf8").split("\n").filter((l) => l !== ""))
  .map((l) => JSON.parse(l) as Record<string, unknown>);

let inputVouched = 0;

/** Holds the fast checks (envelope, event input) to their contracts for one value; returns whether the envelope check vouched. */
function agrees(value: unknown): boolean {
  const fast = fastEnvelope(value);
  const zod = envelopeSchema.safeParse(value);
  if (fast !== undefined) {
    assert.ok(zod.success, `fast check accepted what zod rejects: ${JSON.stringify(value)?.slice(0, 300)}`);
    assert.deepEqual(fast, zod.data);
    assert.deepEqual(Object.keys(fast), Object.keys(zod.data));
  }
  const input = fastEventInput(value);
  const zodInput = eventInputSchema.safeParse(value);
  if (input !== undefined) {
    assert.ok(zodInput.success, `fast event-input check accepted what zod rejects: ${JSON.stringify(value)?.slice(0, 300)}`);
    assert.deepEqual(input, zodInput.data);
    assert.deepEqual(Object.keys(input).sort(), Object.keys(zodInput.data).sort());
  }
  if (input !== undefined) inputVouched++;
  const checked = checkEnvelope(value);
  assert.equal(checked.success, zod.success);
  if (checked.success && zod.success) assert.deepEqual(checked.data, zod.data);
  if (!checked.success) assert.ok(checked.issues.length > 0);
  return fast !== undefined;
}

test("every recorded envelope takes the fast path and matches zod's output", () => {
  assert.ok(recorded.length > 50);
  for (const e of recorded) {
    const value = { ...e, session: "s-1" };
    assert.equal(agrees(value), true, `fast check refused a recorded envelope of kind ${String(e["kind"])}`);
  }
});

// Values near the valid shape: each field either a plausible value, an edge case, or anything at all.
const junk = fc.oneof(
  fc.anything(),
  fc.constantFrom(undefined, null, "", 0, -1, -0, 1.5, 2 ** 53, -(2 ** 53), Number.NaN, Infinity, [], {}, "1", true),
);
const field = <T>(good: fc.Arbitrary<T>): fc.Arbitrary<unknown> => fc.oneof({ weight: 15, arbitrary: good }, { weight: 1, arbitrary: junk });
const kinds = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom("cli.line", "turn.queued", "decision.made", "a.b", "x_1.y2.z") },
  { weight: 2, arbitrary: fc.constantFrom("Cli.line", "cli", "cli.", ".cli", "cli..line", "cli.line\n", "cli.Line", "1a.b") },
  { weight: 1, arbitrary: fc.string() },
);
const sessions = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom("s-1", "A", "a.b_c-9", "a".repeat(128)) },
  { weight: 2, arbitrary: fc.constantFrom("a".repeat(129), "-s", "s/1", "s 1", "s\n", "") },
  { weight: 1, arbitrary: fc.string({ maxLength: 140 }) },
);
const lineData = fc.oneof(
  { weight: 6, arbitrary: fc.record({ raw: fc.string() }) },
  { weight: 2, arbitrary: fc.record({ raw: fc.string(), truncated: fc.anything() }, { requiredKeys: [] }) },
  { weight: 1, arbitrary: fc.dictionary(fc.string(), fc.anything()) },
  { weight: 1, arbitrary: junk },
);
const cli = fc.oneof(
  { weight: 4, arbitrary: fc.record({ version: field(fc.string()), pid: field(fc.integer()) }, { requiredKeys: [] }) },
  { weight: 1, arbitrary: fc.record({ version: fc.string(), extra: fc.anything() }) },
  { weight: 1, arbitrary: junk },
);
const candidate = fc
  .record(
    {
      v: field(fc.constant(1)),
      seq: field(fc.integer({ min: -3, max: 2 ** 31 })),
      session: field(sessions),
      epoch: field(fc.integer({ min: -3, max: 1000 })),
      at: field(fc.oneof(fc.constant("2025-01-01T00:00:00.000Z"), fc.string({ maxLength: 3 }))),
      turn: field(fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom("t".repeat(200), "t".repeat(201), "😀".repeat(100), "😀".repeat(101)))),
      attempt: field(fc.integer({ min: -3, max: 50 })),
      kind: field(kinds),
      data: fc.oneof({ weight: 4, arbitrary: lineData }, { weight: 1, arbitrary: fc.anything() }),
      cli,
      extra: fc.anything(),
      b: fc.anything(),
    },
    { requiredKeys: ["v", "seq", "session", "epoch", "at", "turn", "attempt", "kind", "data"] },
  )
  // Drop or keep fields independently so absent keys are tried as well as wrong ones.
  .chain((r) =>
    fc.subarray(Object.keys(r), { minLength: Math.max(0, Object.keys(r).length - 1) }).map((keys) => {
      const out: Record<string, unknown> = {};
      for (const k of keys) out[k] = r[k as keyof typeof r];
      return out;
    }),
  );

test("property: the fast check never accepts what zod rejects, and yields zod's output when it accepts", () => {
  let vouched = 0;
  let rejected = 0;
  fc.assert(
    fc.property(candidate, (value) => {
      if (agrees(value)) vouched++;
      if (!envelopeSchema.safeParse(value).success) rejected++;
    }),
    { numRuns: 3000 },
  );
  // The generator must exercise both sides of the contract, or the property proves nothing.
  assert.ok(vouched > 100, `only ${vouched} values took the fast path`);
  assert.ok(inputVouched > 100, `only ${inputVouched} values took the event-input fast path`);
  assert.ok(rejected > 100, `only ${rejected} values were invalid`);
});

test("property: arbitrary values (JSON round-tripped or not) never pass the fast check unless zod agrees", () => {
  fc.assert(
    fc.property(fc.oneof(fc.anything(), fc.jsonValue(), fc.dictionary(fc.string(), fc.anything())), (value) => {
      agrees(value);
    }),
    { numRuns: 1000 },
  );
});

test("the edges zod draws are the fast check's edges too", () => {
  const base = { v: 1, seq: 1, session: "s-1", epoch: 0, at: "x", turn: "t", attempt: 0, kind: "cli.line", data: { raw: "{}" } };
  const cases: Record<string, unknown>[] = [
    base,
    { ...base, data: { raw: "" } },
    { ...base, data: {} },
    { ...base, data: { raw: 1 } },
    { ...base, data: null },
    { ...base, kind: "turn.queued", data: null },
    { ...base, kind: "turn.queued", data: undefined },
    { ...base, seq: 0 },
    { ...base, seq: 2 ** 53 },
    { ...base, epoch: -1 },
    { ...base, attempt: 1.5 },
    { ...base, at: "" },
    { ...base, turn: "t".repeat(201) },
    { ...base, turn: "t".repeat(200) },
    { ...base, v: 2 },
    { ...base, session: "-bad" },
    { ...base, kind: "NoDots" },
    { ...base, cli: { pid: 1.5 } },
    { ...base, cli: { pid: 7, version: "2.1.332", more: true } },
    { ...base, cli: [] },
    { ...base, cli: null },
    { ...base, extra: 1 },
  ];
  for (const c of cases) agrees(c);
  assert.equal(fastEnvelope({ ...base, data: {} }), undefined);
  assert.equal(checkEnvelope({ ...base, data: {} }).success, false);
  assert.equal(checkEnvelope({ ...base, seq: 0 }).success, false);
  assert.equal(fastEnvelope(base)?.seq, 1);
});
