import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { createScrubber } from "../../src/telemetry/scrub.ts";

// Secrets of every kind of character: full unicode (astral, lone surrogates), JSON specials, regex
// metacharacters; text around them likewise.
const anyChars = fc.oneof(
  fc.string({ unit: "binary", minLength: 8, maxLength: 40 }),
  fc.string({ unit: fc.constantFrom(...'"\\/\n\t.*+?()[]{}|^$-_aZ09é🔑'), minLength: 8, maxLength: 24 }),
  fc.string({ unit: "grapheme-ascii", minLength: 8, maxLength: 40 }),
);
const text = fc.oneof(
  fc.string({ unit: "binary", maxLength: 60 }),
  fc.string({ unit: "grapheme-ascii", maxLength: 60 }),
);

// A secret must not be a run of one character, nor be formed by the marker text itself.
const secret = anyChars.filter((s) => !/^(.)\1*$/su.test(s) && !"[REDACTED:SECRET_0]".includes(s));

const jsonBody = (s: string): string => JSON.stringify(s).slice(1, -1);

test("property: registered secrets embedded in random text never survive, raw or JSON-escaped", () => {
  fc.assert(
    fc.property(
      fc.array(secret, { minLength: 1, maxLength: 5 }),
      fc.array(text, { minLength: 6, maxLength: 6 }),
      (secrets, parts) => {
        const values = secrets.map((v, i) => [`SECRET_${i}`, v] as const);
        const scrubber = createScrubber({ values, patterns: false });
        const raw = parts[0] + secrets.map((v, i) => v + parts[i + 1]!).join("");
        const line = JSON.stringify({ type: "user", text: raw, again: `${parts[5]}${secrets[0]}` });
        const nested = JSON.stringify({ content: line });
        for (const input of [raw, line, nested]) {
          const out = scrubber.scrub(input);
          for (const secretValue of secrets) {
            assert.ok(!out.includes(secretValue), `raw secret survived in ${JSON.stringify(out)}`);
            assert.ok(!out.includes(jsonBody(secretValue)), `escaped secret survived in ${JSON.stringify(out)}`);
            assert.ok(!out.includes(jsonBody(jsonBody(secretValue))), "doubly escaped secret survived");
          }
        }
        // When the scrubbed line is still JSON, the decoded strings hold no secret either.
        let decoded: { text: string; again: string } | undefined;
        try {
          decoded = JSON.parse(scrubber.scrub(line));
        } catch {
          decoded = undefined;
        }
        if (decoded !== undefined)
          for (const secretValue of secrets)
            assert.ok(!decoded.text.includes(secretValue) && !decoded.again.includes(secretValue));
      },
    ),
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
  const scrubber = createScrubber({ values: { A: "Zq9!never-in-the-alphabet-below" } });
  fc.assert(
    fc.property(
      fc.string({ unit: fc.constantFrom(...'abcdefgh ijklmn.,:;{}"0123456789\n'), maxLength: 300 }),
      (sample) => {
        assert.equal(scrubber.scrub(sample), sample);
      },
    ),
    { numRuns: 300 },
  );
});

test("property: pattern-shaped secrets are redacted inside random JSON text", () => {
  const b64 = fc.string({
    unit: fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"),
    minLength: 24,
    maxLength: 40,
  });
  const shaped = b64.chain((body) =>
    fc.constantFrom(
      `sk-ant-api03-${body}`,
      `ghp_${body}`,
      `xoxb-${body}`,
      `eyJ${body}.eyJ${body}.${body}`,
      `AKIA${body.toUpperCase().slice(0, 16)}`,
    ),
  );
  const scrubber = createScrubber();
  fc.assert(
    fc.property(
      shaped,
      fc.string({ unit: "grapheme-ascii", maxLength: 40 }),
      fc.string({ unit: "grapheme-ascii", maxLength: 40 }),
      (tok, before, after) => {
        const out = scrubber.scrub(JSON.stringify({ text: `${before} ${tok} ${after}` }));
        assert.ok(!out.includes(tok), out);
      },
    ),
    { numRuns: 300 },
  );
});

test("property: short and long secrets together never survive, raw or escaped", () => {
  const shortSecret = fc
    .string({ unit: fc.constantFrom(...'"\\/.*+?()é🔑aZ09-_'), minLength: 4, maxLength: 7 })
    .filter((s) => !/^(.)\1*$/su.test(s) && !"[REDACTED:SECRET_0]".includes(s) && !"[REDACTED:SECRET_1]".includes(s));
  fc.assert(
    fc.property(shortSecret, secret, text, text, text, (shortValue, longValue, p0, p1, p2) => {
      const scrubber = createScrubber({
        values: [
          ["SECRET_0", shortValue],
          ["SECRET_1", longValue],
        ],
        patterns: false,
      });
      const raw = p0 + shortValue + p1 + longValue + p2;
      for (const input of [raw, JSON.stringify({ t: raw }), JSON.stringify({ c: JSON.stringify({ t: raw }) })]) {
        const out = scrubber.scrub(input);
        for (const secretValue of [shortValue, longValue]) {
          assert.ok(
            !out.includes(secretValue) &&
              !out.includes(jsonBody(secretValue)) &&
              !out.includes(jsonBody(jsonBody(secretValue))),
            JSON.stringify(out),
          );
        }
      }
    }),
    { numRuns: 300 },
  );
});

// Raw `cli.line` text is scrubbed as it is, JSON and all: what comes out must still parse, and parse
// to what scrubbing each decoded string would give. Filler holds every character JSON escapes.
const filler = fc.string({ unit: fc.constantFrom(...'aZ09 _-=:/@."\\\n\t\r\u0001\u000b\f\b\u2028é🔑'), maxLength: 12 });
const alnum = (min: number, max: number, chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") =>
  fc.string({ unit: fc.constantFrom(...chars), minLength: min, maxLength: max });
const space = fc.constantFrom(" ", "\t", "\n", "\r", "\u000b", "\f");
const b64url = (o: object): string => Buffer.from(JSON.stringify(o)).toString("base64url");
// [shape, whether it must end its string: a truncated key runs to the end of the JSON string it is in]
const shapeAt = fc.oneof(
  alnum(36, 40).map((b) => [`ghp_${b}`, false] as const),
  alnum(22, 30).map((b) => [`github_pat_11${b}_${b}`, false] as const),
  alnum(16, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789").map((b) => [`AKIA${b}`, false] as const),
  alnum(8, 20).map((b) => [`${b64url({ alg: "HS256" })}.${b64url({ sub: b })}.${b}`, false] as const),
  alnum(20, 40).map((b) => [`sk-ant-api03-${b}`, false] as const),
  alnum(12, 20).map((b) => [`xoxb-123-${b}`, false] as const),
  fc.tuple(alnum(8, 30), space).map(([token, sp]) => [`Authorization: Bearer${sp}${token}1`, false] as const),
  fc.tuple(alnum(8, 20), space).map(([token, sp]) => [`authorization:${sp}Basic ${token}==`, false] as const),
  alnum(16, 30).map((b) => [`aws_secret_access_key = ${b}`, false] as const),
  alnum(6, 20).map((b) => [`postgres://bob:${b}@db.example:5432/app`, false] as const),
  alnum(20, 60).map(
    (b) => [`-----BEGIN RSA PRIVATE KEY-----\n${b}\n${b}\n-----END RSA PRIVATE KEY-----`, false] as const,
  ),
  alnum(20, 60).map((b) => [`-----BEGIN PRIVATE KEY-----\n${b}\n${b}`, true] as const),
);
const field = fc
  .tuple(filler, shapeAt, filler)
  .map(([head, [shape, last], tail]) => (last ? head + shape : head + shape + tail));

test("property: scrubbing a valid JSON line with secret shapes yields valid JSON that parses to the scrubbed fields", () => {
  const scrubber = createScrubber();
  fc.assert(
    fc.property(fc.array(fc.oneof(field, filler), { minLength: 1, maxLength: 4 }), (texts) => {
      const line = JSON.stringify({
        type: "user",
        content: texts.map((text) => ({ type: "text", text })),
        nested: JSON.stringify({ t: texts[0] }),
      });
      const out = scrubber.scrub(line);
      let parsed: { content: Array<{ text: string }>; nested: string };
      try {
        parsed = JSON.parse(out);
      } catch (err) {
        throw new Error(`not JSON after scrubbing: ${JSON.stringify(out)} (${(err as Error).message})`);
      }
      assert.deepEqual(
        parsed.content.map((c) => c.text),
        texts.map((t) => scrubber.scrub(t)),
      );
    }),
    { numRuns: 1500 },
  );
});

test("property: registered values in a JSON line leave it valid JSON, even next to an escape", () => {
  // Values made of the letters escapes use, so a value can start on the `n` of a `\n`.
  const value = fc
    .string({ unit: fc.constantFrom(..."nrtbfu0a1B9-_\\"), minLength: 8, maxLength: 16 })
    .filter((v) => !/^(.)\1*$/s.test(v));
  fc.assert(
    fc.property(value, filler, filler, (secretValue, before, after) => {
      const scrubber = createScrubber({ values: { SECRET_0: secretValue }, patterns: false });
      for (const raw of [
        before + secretValue + after,
        before + secretValue.slice(1) + after,
        before + "\n" + secretValue.slice(1) + after,
      ]) {
        const line = JSON.stringify({ text: raw, again: JSON.stringify({ t: raw }) });
        const out = scrubber.scrub(line);
        const parsed = JSON.parse(out) as { text: string };
        assert.ok(!parsed.text.includes(secretValue), JSON.stringify(out));
      }
    }),
    { numRuns: 1500 },
  );
});
