import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { createPrefilter } from "../../src/telemetry/prefilter.ts";
import { BUILTIN_PATTERNS, combinedPrecheck } from "../../src/telemetry/patterns.ts";

// Anchors and text of every kind of character: full unicode (astral halves, lone surrogates),
// characters that collide in the 8-bit hash (U+0141 vs A), regex and JSON metacharacters.
const unit = fc.oneof(
  fc.constantFrom(...'abcAB"\\/.*+?()[]{}|^$-_09é🔑\u0141\u0161\n \t'),
  fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
);
const str = (min: number, max: number) => fc.string({ unit, minLength: min, maxLength: max });
const asciiFoldIncludes = (t: string, a: string): boolean => {
  // what a non-unicode `i` regex does for ASCII letters
  const lower = (s: string) => s.replace(/[A-Z]/g, (c) => c.toLowerCase());
  return lower(t).includes(lower(a));
};

test("property: the prefilter says yes exactly when some anchor's first m characters occur", () => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ text: str(2, 20), ignoreCase: fc.boolean() }), { minLength: 1, maxLength: 6 }),
      fc.integer({ min: 2, max: 16 }),
      str(0, 30),
      str(0, 30),
      fc.nat(),
      fc.boolean(),
      (anchors, window, before, after, pick, plant) => {
        const f = createPrefilter(anchors, window);
        const m = Math.min(window, ...anchors.map((a) => a.text.length));
        const a = anchors[pick % anchors.length]!;
        const text = plant ? before + a.text + after : before + after;
        const expected = anchors.some((x) =>
          x.ignoreCase === true ? asciiFoldIncludes(text, x.text.slice(0, m)) : text.includes(x.text.slice(0, m)),
        );
        assert.equal(f(text), expected);
        if (plant) assert.equal(f(text), true);
      },
    ),
    { numRuns: 500 },
  );
});

test("prefilter: case-insensitive anchors fold ASCII letters only; long clean text is rejected", () => {
  const f = createPrefilter([{ text: "bearer", ignoreCase: true }, { text: "Zq9-x" }]);
  assert.equal(f("Authorization: BeArEr abc"), true);
  assert.equal(f("zq9-x"), false, "case-sensitive anchor");
  assert.equal(f("a Zq9-x"), true);
  assert.equal(f("b\u0161arer"), false);
  assert.equal(f("the quick brown fox ".repeat(500)), false);
  assert.equal(f(""), false);
  assert.throws(() => createPrefilter([{ text: "a" }]), RangeError);
});

test("property: built-in pre-checks pass every text their pattern's regex matches", () => {
  const token = fc.string({ unit: fc.constantFrom(..."ABCXYZabcxyz0129_-./+="), minLength: 0, maxLength: 40 });
  const word = fc.constantFrom(
    "sk-ant-",
    "ghp_",
    "gho_",
    "github_pat_",
    "AKIA",
    "ASIA",
    "xoxb-",
    "eyJ",
    ".",
    "Bearer ",
    "bearer\t",
    "BEARER\u00a0",
    "Authorization: Basic ",
    'authorization\\": \\"basic ',
    "AWS_SECRET_ACCESS_KEY=",
    "aws.secret-access_key: ",
    "redis://",
    "https://u:",
    "@",
    ":",
    "-----BEGIN RSA PRIVATE KEY-----",
    "PRIVATE KEY",
    " ",
    "\\n",
    "\\t",
    "\\f",
    "\\u000b",
    "\\u0001",
    "\\",
    '"',
  );
  const text = fc.array(fc.oneof(word, token), { maxLength: 12 }).map((xs) => xs.join(""));
  const any = combinedPrecheck(BUILTIN_PATTERNS);
  fc.assert(
    fc.property(text, (t) => {
      for (const p of BUILTIN_PATTERNS) {
        p.regex.lastIndex = 0;
        if (p.regex.test(t)) {
          p.regex.lastIndex = 0;
          assert.ok(p.precheck.test(t), `${p.name} precheck missed ${JSON.stringify(t)}`);
          assert.ok(any(t), `combined precheck missed ${p.name} in ${JSON.stringify(t)}`);
        }
      }
      p: for (const p of BUILTIN_PATTERNS)
        if (p.precheck.test(t)) {
          assert.ok(any(t));
          break p;
        }
    }),
    { numRuns: 2000 },
  );
});
