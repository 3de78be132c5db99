// The hand-written fast paths are held to the zod schemas they stand in for, by one property: for any
// input — a recorded one, or one mutated (a field of the wrong type, missing, extra, null, an array,
// the whole value replaced) — a fast check that accepts means its schema accepts, and the envelope
// checks yield exactly zod's output. A fast check may refuse what zod accepts (zod then decides),
// but every recorded input must take its fast path, or the fast path buys nothing.
// Fast paths: src/log/envelope.ts (fastEnvelope, fastEventInput).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import type { z as zod } from "zod";
import { envelopeSchema, eventInputSchema, fastEnvelope, fastEventInput } from "../../src/log/envelope.ts";

type Obj = Record<string, unknown>;
const fixtures = join(import.meta.dirname, "..", "fixtures");
const jsonlLines = (dir: string): string[] =>
  readdirSync(dir)
    .filter((f) => f.endsWith(".jsonl"))
    .flatMap((f) => readFileSync(join(dir, f), "utf8").split("\n"))
    .map((l) => l.replace(/\r$/, ""))
    .filter((l) => l.trim() !== "");

const envelopes = jsonlLines(join(fixtures, "logs")).map((l) => JSON.parse(l) as Obj);
interface FastPath {
  name: string;
  /** The fast check's output, or undefined when it does not vouch for the value. */
  fast(value: unknown): { output: unknown } | undefined;
  schema: zod.ZodType;
  /** Whether the fast output must be zod's (key order too, unless `anyKeyOrder`). */
  sameOutput: boolean;
  anyKeyOrder?: boolean;
  /** Recorded inputs: the property mutates them, and each must take the fast path as it is. */
  samples: unknown[];
}

/** Inputs whose treatment zod and the fast envelope check must agree on, at the edges of the schema. */
const envelopeBase = {
  v: 1,
  seq: 1,
  session: "s-1",
  epoch: 0,
  at: "x",
  turn: "t",
  attempt: 0,
  kind: "cli.line",
  data: { raw: "{}" },
};
const envelopeEdges: unknown[] = [
  { ...envelopeBase, data: { raw: "" } },
  { ...envelopeBase, data: {} },
  { ...envelopeBase, data: null },
  { ...envelopeBase, kind: "turn.queued", data: null },
  { ...envelopeBase, kind: "turn.queued", data: undefined },
  { ...envelopeBase, seq: 0 },
  { ...envelopeBase, seq: 2 ** 53 },
  { ...envelopeBase, epoch: -1 },
  { ...envelopeBase, attempt: 1.5 },
  { ...envelopeBase, at: "" },
  { ...envelopeBase, turn: "t".repeat(201) },
  { ...envelopeBase, turn: "t".repeat(200) },
  { ...envelopeBase, turn: "😀".repeat(101) },
  { ...envelopeBase, v: 2 },
  { ...envelopeBase, session: "-bad" },
  { ...envelopeBase, session: "a".repeat(129) },
  { ...envelopeBase, kind: "NoDots" },
  { ...envelopeBase, kind: "cli.line\n" },
  { ...envelopeBase, cli: { pid: 1.5 } },
  { ...envelopeBase, cli: { pid: 7, version: "2.1.332", more: true } },
  { ...envelopeBase, cli: [] },
  { ...envelopeBase, cli: null },
  { ...envelopeBase, cli: undefined },
  { ...envelopeBase, extra: 1 },
];

const fastPaths: FastPath[] = [
  {
    name: "fastEnvelope",
    fast: (value) => {
      const out = fastEnvelope(value);
      return out === undefined ? undefined : { output: out };
    },
    schema: envelopeSchema,
    sameOutput: true,
    samples: [envelopeBase, ...envelopes],
  },
  {
    name: "fastEventInput",
    fast: (value) => {
      const out = fastEventInput(value);
      return out === undefined ? undefined : { output: out };
    },
    schema: eventInputSchema,
    sameOutput: true,
    anyKeyOrder: true,
    samples: envelopes.map(({ turn, attempt, kind, data, at }) => ({ turn, attempt, kind, data, at })),
  },
];

test("every recorded input takes its fast path", () => {
  for (const path of fastPaths) {
    assert.ok(path.samples.length > 0, `${path.name}: no recorded samples`);
    for (const sample of path.samples)
      if (path.fast(sample) === undefined) assert.fail(`${path.name} refused a recorded input: ${shown(sample)}`);
  }
});

// ---- mutations -----------------------------------------------------------------------------------

const junk = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom<unknown>(
      undefined,
      null,
      "",
      "x",
      0,
      -1,
      -0,
      1.5,
      2 ** 53,
      Number.NaN,
      Infinity,
      true,
      [],
      [1],
      ["a", null],
      {},
      { type: "text" },
      { raw: 1 },
    ),
  },
  { weight: 1, arbitrary: fc.anything() },
);

interface Mutation {
  /** Picks the place (modulo the number of places in the value). */
  at: number;
  op: "delete" | "set" | "extra" | "replace";
  key: string;
  value: unknown;
}
const mutation: fc.Arbitrary<Mutation> = fc.record({
  at: fc.nat(),
  op: fc.constantFrom<Mutation["op"]>("delete", "set", "set", "extra", "replace"),
  key: fc.oneof(fc.constantFrom("type", "raw", "subtype", "session_id", "extra"), fc.string({ maxLength: 6 })),
  value: junk,
});

/** Every object or array inside `v` (the root included), with the path to it; a few levels deep. */
function containers(value: unknown, path: string[] = [], out: string[][] = []): string[][] {
  if (value === null || typeof value !== "object" || path.length > 4) return out;
  out.push(path);
  for (const [key, child] of Object.entries(value)) containers(child, [...path, key], out);
  return out;
}

function at(root: unknown, path: string[]): Obj {
  let node = root as Obj;
  for (const key of path) node = node[key] as Obj;
  return node;
}

/** `value` with one field of one of its objects (or arrays) deleted, set, added, or the container replaced. */
function mutate(value: unknown, mutation: Mutation): unknown {
  // A copy of the new value: the same one put in twice could end up inside itself.
  const copied = { ...mutation, value: structuredClone(mutation.value) };
  const places = containers(value);
  if (places.length === 0) return copied.value;
  const path = places[copied.at % places.length]!;
  if (copied.op === "replace") {
    if (path.length === 0) return copied.value;
    at(value, path.slice(0, -1))[path[path.length - 1]!] = copied.value;
    return value;
  }
  const target = at(value, path);
  const keys = Object.keys(target);
  const key = copied.op === "extra" || keys.length === 0 ? copied.key : keys[copied.at % keys.length]!;
  if (copied.op === "delete") {
    if (Array.isArray(target) && /^\d+$/.test(key)) target.splice(Number(key), 1);
    else delete target[key];
  } else if (!(Array.isArray(target) && key === "length")) {
    // defineProperty: a key named __proto__ becomes an own field, as JSON.parse makes it.
    Object.defineProperty(target, key, { value: copied.value, enumerable: true, writable: true, configurable: true });
  }
  return value;
}

const input = fc.nat().chain((pathIndex) => {
  const path = fastPaths[pathIndex % fastPaths.length]!;
  const edges = path.name === "fastEnvelope" || path.name === "fastEventInput" ? envelopeEdges : [];
  const recorded = fc
    .tuple(fc.constantFrom(...path.samples), fc.array(mutation, { minLength: 1, maxLength: 3 }))
    .map(([sample, ms]) => {
      let mutated: unknown = structuredClone(sample);
      for (const step of ms) mutated = mutate(mutated, step);
      return mutated;
    });
  const sources = [
    { weight: 12, arbitrary: recorded },
    { weight: 1, arbitrary: fc.anything() },
  ];
  if (edges.length > 0) sources.push({ weight: 2, arbitrary: fc.constantFrom(...edges) });
  return fc.oneof(...sources).map((value) => ({ path: path.name, value }));
});

const pathNamed = new Map(fastPaths.map((p) => [p.name, p]));

function shown(value: unknown): string {
  try {
    return String(JSON.stringify(value)).slice(0, 300);
  } catch {
    return String(value);
  }
}

test("property: a fast check that accepts means its schema accepts, with zod's output for the envelope", () => {
  const vouched = new Map<string, number>();
  const refused = new Map<string, number>();
  fc.assert(
    fc.property(input, ({ path: name, value }) => {
      const path = pathNamed.get(name)!;
      const parsed = path.schema.safeParse(value);
      if (!parsed.success) refused.set(path.name, (refused.get(path.name) ?? 0) + 1);
      const fast = path.fast(value);
      if (fast === undefined) return;
      vouched.set(path.name, (vouched.get(path.name) ?? 0) + 1);
      if (!parsed.success)
        assert.fail(
          `${path.name} accepted what its schema rejects (${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}): ${shown(value)}`,
        );
      if (!path.sameOutput) return;
      assert.deepEqual(fast.output, parsed.data);
      const keys = (o: unknown): string[] =>
        path.anyKeyOrder === true ? Object.keys(o as Obj).sort() : Object.keys(o as Obj);
      assert.deepEqual(keys(fast.output), keys(parsed.data));
    }),
    { numRuns: 12_000 },
  );
  // Both sides of every contract must be exercised, or the property proves nothing.
  for (const path of fastPaths) {
    assert.ok(
      (vouched.get(path.name) ?? 0) > 100,
      `${path.name}: only ${vouched.get(path.name) ?? 0} inputs took the fast path`,
    );
    assert.ok(
      (refused.get(path.name) ?? 0) > 100,
      `${path.name}: only ${refused.get(path.name) ?? 0} inputs were invalid`,
    );
  }
});
