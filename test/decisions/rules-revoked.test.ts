// `turnstream rules list --revoked`: a revoked rule leaves `rules list`, and is found here with who
// revoked it, when, why, whether the record's signature verifies and where it is recorded. The index
// keeps the newest 100 revocations. What an attacker writes into the index by hand is escaped, shown as
// not verifying, or (when it is no revocation) skipped and counted.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  REVOKED_KEPT,
  revokedKey,
  revokeRule,
  type RevocationRow,
  type RuleRevoked,
} from "../../src/decisions/index.ts";
import { plantRevocations, MARKUP } from "./_revocations.ts";
import { cli, eventsOf, operatorKeyFile, OPERATOR, putRule, revocableRule, withCtx, type Ctx } from "./_support.ts";

interface Listed {
  revocations: RevocationRow[];
  unreadable: number;
}

const env = (ctx: Ctx, extra: Record<string, string> = {}) => ({ TURNSTREAM_PREFIX: ctx.prefix, ...extra });
const trusting = (ctx: Ctx) => env(ctx, { TURNSTREAM_OPERATOR_KEYS: OPERATOR.publicKey });

async function listRevoked(ctx: Ctx, keys = true): Promise<Listed> {
  const listed = await cli(["rules", "list", "--revoked", "--json"], keys ? trusting(ctx) : env(ctx));
  assert.equal(listed.code, 0, listed.stderr);
  return JSON.parse(listed.stdout) as Listed;
}

test("rules list --revoked: a signed and an unsigned revocation, newest first, with who, why, where and whether each verifies", async () => {
  await withCtx(async (ctx) => {
    const signedRule = await revocableRule(ctx, "Bash(git push:*)");
    const unsignedRule = await revocableRule(ctx, "WebFetch(domain:example.com)", "deny");
    const keyed = env(ctx, { TURNSTREAM_USER: "erin", TURNSTREAM_OPERATOR_KEY: operatorKeyFile(ctx.dir) });
    assert.equal((await cli(["rules", "revoke", signedRule.id, "--reason", "too broad"], keyed)).code, 0);
    const unsigned = await cli(["rules", "revoke", unsignedRule.id], env(ctx, { TURNSTREAM_USER: "olga" }));
    assert.equal(unsigned.code, 0, unsigned.stderr);
    assert.equal((await cli(["rules", "list"], env(ctx))).stdout, "no trust rules\n");
    const records = await eventsOf(ctx, "rule.revoked");
    const [first, second] = records.map((event) => ({ seq: event.seq, data: event.data as RuleRevoked }));

    const { revocations, unreadable } = await listRevoked(ctx);
    assert.equal(unreadable, 0);
    assert.deepEqual(revocations, [
      {
        ruleId: unsignedRule.id,
        effect: "deny",
        pattern: "WebFetch(domain:example.com)",
        addedBy: "erin",
        revokedBy: "olga",
        revokedAt: second!.data.revokedAt,
        reason: null,
        keyId: null,
        verified: false,
        why: "it is not signed",
        session: ctx.session,
        seq: second!.seq,
      },
      {
        ruleId: signedRule.id,
        effect: "allow",
        pattern: "Bash(git push:*)",
        addedBy: "erin",
        revokedBy: "erin",
        revokedAt: first!.data.revokedAt,
        reason: "too broad",
        keyId: OPERATOR.keyId,
        verified: true,
        why: null,
        session: ctx.session,
        seq: first!.seq,
      },
    ]);
    const unchecked = await listRevoked(ctx, false);
    assert.deepEqual(
      unchecked.revocations.map((row) => row.verified),
      [null, null],
      "no keys here: unchecked",
    );

    const text = await cli(["rules", "list", "--revoked"], trusting(ctx));
    assert.equal(
      text.stdout,
      `${unsignedRule.id} deny WebFetch(domain:example.com)\n` +
        `  added by erin; revoked by olga at ${second!.data.revokedAt}, recorded at seq ${second!.seq} of session ${ctx.session}; signature: does NOT verify: it is not signed\n` +
        `${signedRule.id} allow Bash(git push:*)\n` +
        `  added by erin; revoked by erin at ${first!.data.revokedAt}, recorded at seq ${first!.seq} of session ${ctx.session}; signature: verified (${OPERATOR.keyId})\n` +
        `  reason: too broad\n`,
    );
  });
});

test(`the index keeps exactly the newest ${REVOKED_KEPT} revocations`, async () => {
  await withCtx(async (ctx) => {
    await revocableRule(ctx, "Bash(seed)");
    const total = REVOKED_KEPT + 5;
    for (let step = 0; step < total; step++) {
      const rule = await putRule(ctx, `Bash(step-${step})`);
      await revokeRule({ log: ctx.log }, { rule: rule.id, by: "op", session: ctx.session });
    }
    assert.equal(await ctx.redis.llen(revokedKey(ctx.prefix)), REVOKED_KEPT);
    const { revocations } = await listRevoked(ctx);
    const expected = Array.from({ length: REVOKED_KEPT }, (_, newer) => `Bash(step-${total - 1 - newer})`);
    assert.deepEqual(
      revocations.map((row) => row.pattern),
      expected,
    );
  });
});

test("entries written into the index by hand: markup and controls escaped, forged and swapped records do not verify, junk skipped and counted", async () => {
  await withCtx(async (ctx) => {
    const planted = await plantRevocations(ctx.redis, ctx.prefix, ctx.session);
    const { revocations, unreadable } = await listRevoked(ctx);
    assert.equal(unreadable, planted.malformed);
    const byPattern = new Map(revocations.map((row) => [row.pattern, row]));
    assert.equal(revocations.length, 3);
    assert.deepEqual(
      [byPattern.get("Bash(curl *)")!.verified, byPattern.get("Bash(curl *)")!.why],
      [false, "its signature does not match"],
    );
    assert.deepEqual(
      [byPattern.get("Bash(rm -rf *)")!.verified, byPattern.get("Bash(rm -rf *)")!.why],
      [false, "its record names another rule"],
    );
    assert.equal(byPattern.get(planted.hostile.rule.pattern)!.verified, false);

    const text = await cli(["rules", "list", "--revoked"], trusting(ctx));
    assert.equal(text.code, 0, text.stderr);
    assert.doesNotMatch(text.stdout, /[\u0000-\u0009\u000b-\u001f\u007f\u202e]/, "no raw control character");
    const hostileId = planted.hostile.rule.id;
    assert.ok(
      text.stdout.includes(
        `${hostileId} allow Bash(${MARKUP}\\x1b[31m)\n  added by eve\\u202e${MARKUP}; revoked by eve\\u202e${MARKUP} at `,
      ),
      text.stdout,
    );
    assert.ok(text.stdout.includes(`  reason: first\\n\\x1b]0;owned\\x07${MARKUP}\n`), text.stdout);
    assert.ok(
      text.stdout.includes("of session javascript:window.pwned=2; signature: does NOT verify: it is not signed"),
    );
    assert.match(text.stdout, /signature: does NOT verify: its signature does not match\n/);
    assert.ok(text.stdout.endsWith(`${planted.malformed} entries of the index are not revocations: not shown\n`));
  });
});
