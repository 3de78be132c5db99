import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { createScrubber } from "../../src/telemetry/scrub.ts";

// Secrets of every kind of character: full unicode (astral, lone surrogates), JSON specials, regex
// metacharacters; text around them likewise.
const anyChars = fc.oneof(
  fc.string({ unit: "binary", minLength: 8, maxLength: 40 }),
  fc.string({ unit: fc.constantFrom(..."\"\\/\n\t.*+?()[]{}|^$-_aZ09é🔑"), minLength: 8, maxLength: 24 }),
  fc.string({ unit: "grapheme-ascii", minLength: 8, maxLength: 40 }),
);
const text = fc.oneof(fc.string({ unit: "binary", maxLength: 60 }), fc.string({ unit: "grapheme-ascii", maxLength: 60 }));

// A secret must not be a run of one character, nor be formed by the marker text itself.
const secret = anyChars.filter((s) => !/^(.)\1*$/su.test(s) && !"[REDACTED:SECRET_0]".includes(s));

const jsonBody = (s: string): string => JSON.stringify(s).slice(1, -1);

test("property: registered secrets embedded in random text never survive, raw or JSON-escaped", () => {
  fc.assert(
    fc.property(fc.array(secret, { minLength: 1, maxLength: 5 }), fc.array(text, { minLength: 6, maxLength: 6 }), (secrets, parts) => {
      const values = secrets.map((v, i) => [`SECRET_${i}`, v] as const);
      const s = createScrubber({ values, patterns: false });
      const raw = parts[0] + secrets.map((v, i) => v + parts[i + 1]!).join("");
      const line = JSON.stringify({ type: "user", text: raw, again: `${parts[5]}${secrets[0]}` });
      const nested = JSON.stringify({ content: line });
      for (const input of [raw, line, nested]) {
        const out = s.scrub(input);
        for (const v of secrets) {
          assert.ok(!out.includes(v), `raw secret survived in ${JSON.stringify(out)}`);
          assert.ok(!out.includes(jsonBody(v)), `escaped secret survived in ${JSON.stringify(out)}`);
          assert.ok(!out.includes(jsonBody(jsonBody(v))), "doubly escaped secret survived");
        }
      }
      // When the scrubbed line is still JSON, the decoded strings hold no secret either.
      let decoded: { text: string; again: string } | undefined;
      try {
        decoded = JSON.parse(s.scrub(line));
      } catch {
        decoded = undefined;
      }
      if (decoded !== undefined) for (const v of secrets) assert.ok(!decoded.text.includes(v) && !decoded.again.includes(v));
    }),
    { numRuns: 400 },
  );
});

test("property: secrets from an env overlay are caught in a child, and only there", () => {
  const envSecret = fc
    .string({ unit: "grapheme", minLength: 10, maxLength: 40 })
    .filter((s) => s.length >= 10 && !/^(.)\1*$/su.test(s) && !/^(true|false|none|null)$/i.test(s));
  fc.assert(
    fc.property(envSecret, text, text, (value, before, after) => {
      const parent = createScrubber({ patterns: false });
      const child = parent.child({ RUN_API_KEY: value });
      const input = JSON.stringify({ m: before + value + after });
      const out = child.scrub(input);
      assert.ok(!out.includes(value) && !out.includes(jsonBody(value)));
      assert.match(out, /\[REDACTED:RUN_API_KEY\]/);
      assert.equal(parent.scrub(input), input);
    }),
    { numRuns: 200 },
  );
});

test("property: text without secrets or secret shapes passes through unchanged", () => {
  const s = createScrubber({ values: { A: "Zq9!never-in-the-alphabet-below" } });
  fc.assert(
    fc.property(fc.string({ unit: fc.constantFrom(..."abcdefgh ijklmn.,:;{}\"0123456789\n"), maxLength: 300 }), (t) => {
      assert.equal(s.scrub(t), t);
    }),
    { numRuns: 300 },
  );
});

test("property: pattern-shaped secrets are redacted inside random JSON text", () => {
  const b64 = fc.string({ unit: fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"), minLength: 24, maxLength: 40 });
  const shaped = b64.chain((body) =>
    fc.constantFrom(
      `sk-ant-api03-${body}`,
      `ghp_${body}`,
      `xoxb-${body}`,
      `eyJ${body}.eyJ${body}.${body}`,
      `AKIA${body.toUpperCase().slice(0, 16)}`,
    ),
  );
  const s = createScrubber();
  fc.assert(
    fc.property(shaped, fc.string({ unit: "grapheme-ascii", maxLength: 40 }), fc.string({ unit: "grapheme-ascii", maxLength: 40 }), (tok, a, b) => {
      const out = s.scrub(JSON.stringify({ text: `${a} ${tok} ${b}` }));
      assert.ok(!out.includes(tok), out);
    }),
    { numRuns: 300 },
  );
});

test("property: short and long secrets together (prefilter and literal fallback) never survive, raw or escaped", () => {
  const shortSecret = fc
    .string({ unit: fc.constantFrom(..."\"\\/.*+?()é🔑aZ09-_"), minLength: 4, maxLength: 7 })
    .filter((s) => !/^(.)\1*$/su.test(s) && !"[REDACTED:SECRET_0]".includes(s) && !"[REDACTED:SECRET_1]".includes(s));
  fc.assert(
    fc.property(shortSecret, secret, text, text, text, (a, b, p0, p1, p2) => {
      const s = createScrubber({ values: [["SECRET_0", a], ["SECRET_1", b]], patterns: false });
      const raw = p0 + a + p1 + b + p2;
      for (const input of [raw, JSON.stringify({ t: raw }), JSON.stringify({ c: JSON.stringify({ t: raw }) })]) {
        const out = s.scrub(input);
        for (const v of [a, b]) {
          assert.ok(!out.includes(v) && !out.includes(jsonBody(v)) && !out.includes(jsonBody(jsonBody(v))), JSON.stringify(out));
        }
      }
    }),
    { numRuns: 300 },
  );
});
