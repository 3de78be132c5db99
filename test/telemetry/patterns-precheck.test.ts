import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { BUILTIN_PATTERNS, combinedPrecheck } from "../../src/telemetry/patterns.ts";

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
