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
    fc.property(text, (sample) => {
      for (const pattern of BUILTIN_PATTERNS) {
        pattern.regex.lastIndex = 0;
        if (pattern.regex.test(sample)) {
          pattern.regex.lastIndex = 0;
          assert.ok(pattern.precheck.test(sample), `${pattern.name} precheck missed ${JSON.stringify(sample)}`);
          assert.ok(any(sample), `combined precheck missed ${pattern.name} in ${JSON.stringify(sample)}`);
        }
      }
      p: for (const pattern of BUILTIN_PATTERNS)
        if (pattern.precheck.test(sample)) {
          assert.ok(any(sample));
          break p;
        }
    }),
    { numRuns: 2000 },
  );
});
