// `turnstream rules list|revoke` as operators run them: a rule `decide --always` added is listed with
// whether it verifies against the fleet's keys; revoking it records `rule.revoked` in the log that
// recorded its addition, and the real CLI's next identical call is no longer decided by it. Revoking
// needs the operator Redis role, which has what it takes, the index of recent revocations included (a
// reader is told which role to use, and can read that index but not write it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  parseOperatorKeys,
  revokedKey,
  rulesKey,
  RuleStore,
  verifyRuleRevoked,
  writeOperatorKeyFile,
  type RuleRevoked,
} from "../../src/decisions/index.ts";
import { createEventLog } from "../../src/log/index.ts";
import { testSpace } from "../worker/_support.ts";
import { startAclRedis } from "./_acl-redis.ts";
import {
  bash,
  cli,
  eventsOf,
  nextEvent,
  OPERATOR,
  prepare,
  putRule,
  setup,
  stranger,
  supervisedTurn,
  withHub,
} from "./_support.ts";

test(
  "rules list shows a decide --always rule and whether it verifies; rules revoke records who revoked it and the real CLI's next call is not decided by it",
  { timeout: 180_000 },
  async () => {
    const ctx = await setup();
    try {
      // A call nobody answers is denied after 3 s: what the third run below runs into once the rule is gone.
      const hub = await withHub(ctx, { timeoutMs: 3000 });
      const run = prepare(ctx, hub);
      const keyFile = join(ctx.dir, "keys", "operator.key");
      writeOperatorKeyFile(keyFile, OPERATOR.privateKeyPem);
      const env = { TURNSTREAM_PREFIX: ctx.prefix, TURNSTREAM_USER: "erin", TURNSTREAM_OPERATOR_KEY: keyFile };
      const marker = (n: number): string => join(ctx.dir, `ran-${n}`);
      const touch = (n: number) => bash(`touch ${marker(n)}`);

      // 1. The operator allows the first call for good: decide --always adds the rule (rule.added).
      const first = supervisedTurn(ctx, run, [touch(1)]);
      const requested = await nextEvent(ctx, "decision.requested");
      const requestId = (requested.data as { requestId: string }).requestId;
      const decided = await cli(
        ["decide", ctx.session, requestId, "allow", "--always", "--rule", "Bash(touch *)"],
        env,
      );
      assert.equal(decided.code, 0, decided.stderr);
      await first;
      assert.ok(existsSync(marker(1)));

      // 2. The rule decides the next call by itself.
      await supervisedTurn(ctx, run, [touch(2)]);
      assert.ok(existsSync(marker(2)), "the rule allowed it");
      const sources = async (): Promise<string[]> =>
        (await eventsOf(ctx, "decision.made")).map((e) => (e.data as { source: string }).source);
      assert.deepEqual(await sources(), ["operator", "rule"]);

      // 3. Listed, with whether its signature verifies against the keys given here.
      const listed = await cli(["rules", "list"], { ...env, TURNSTREAM_OPERATOR_KEYS: OPERATOR.publicKey });
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, /^rule-[0-9a-f]{16} allow Bash\(touch \*\)$/m);
      assert.match(
        listed.stdout,
        new RegExp(
          `^  added by erin at \\S+, from session ${ctx.session} \\(request ${requestId}\\); signature: verified`,
          "m",
        ),
      );
      const asJson = async (keys: string | undefined) =>
        JSON.parse(
          (
            await cli(
              ["rules", "list", "--json"],
              keys === undefined ? env : { ...env, TURNSTREAM_OPERATOR_KEYS: keys },
            )
          ).stdout,
        ) as Array<{ id: string; pattern: string; effect: string; by: string; verified: boolean | null; why?: string }>;
      const [trusted] = await asJson(OPERATOR.publicKey);
      assert.deepEqual(
        [trusted!.pattern, trusted!.effect, trusted!.by, trusted!.verified],
        ["Bash(touch *)", "allow", "erin", true],
      );
      const [foreign] = await asJson(stranger.publicKey);
      assert.equal(foreign!.verified, false);
      assert.match(foreign!.why!, /is not one of this worker's operator keys/);
      assert.equal((await asJson(undefined))[0]!.verified, null, "no keys here: unchecked");

      // 4. Revoked by its pattern: recorded where its addition was, signed, and gone from the store.
      const revoked = await cli(["rules", "revoke", "Bash(touch *)", "--reason", "too broad"], env);
      assert.equal(revoked.code, 0, revoked.stderr);
      assert.match(
        revoked.stdout,
        new RegExp(
          `^${trusted!.id} allow Bash\\(touch \\*\\): revoked; rule.revoked at seq \\d+ of session ${ctx.session} \\(signed with `,
          "m",
        ),
      );
      const [record] = await eventsOf(ctx, "rule.revoked");
      const [added] = await eventsOf(ctx, "rule.added");
      const data = record!.data as RuleRevoked;
      assert.deepEqual(
        [data.ruleId, data.pattern, data.by, data.reason, record!.turn, record!.attempt],
        [trusted!.id, "Bash(touch *)", "erin", "too broad", added!.turn, added!.attempt],
      );
      assert.equal(verifyRuleRevoked(parseOperatorKeys([OPERATOR.publicKey]), data).ok, true);
      assert.deepEqual(await new RuleStore(ctx.redis, ctx.prefix).list(), []);
      assert.equal((await cli(["rules", "list"], env)).stdout, "no trust rules\n");

      // 5. The same call again: no rule decides it; nobody answers, so the hub denies it at its timeout.
      const third = await supervisedTurn(ctx, run, [touch(3)]);
      assert.equal(existsSync(marker(3)), false, "the revoked rule no longer allows it");
      assert.equal(third.toolResults[0]?.isError, true);
      assert.deepEqual(await sources(), ["operator", "rule", "timeout"]);
      run.close();
    } finally {
      await ctx.cleanup();
    }
  },
);

test("revoke: an unknown rule, a pattern naming two rules, a rule without a session; the operator role may revoke, a reader may not", async () => {
  const space = testSpace();
  const acl = await startAclRedis(space);
  const worker = acl.client("worker");
  const session = `s-rules-${space.id}`;
  try {
    // A session's log (the worker writes it) and rules no decision added: one allow and one deny of one pattern.
    await createEventLog({ redis: worker, prefix: space.logPrefix }).appendUnfenced(session, [
      { turn: "t1", attempt: 0, kind: "turn.queued", data: { prompt: "p", cwd: "/tmp" } },
    ]);
    const ctx = { redis: acl.client("operator"), prefix: space.logPrefix } as Parameters<typeof putRule>[0];
    const allow = await putRule(ctx, "Bash(git *)", "allow");
    await putRule(ctx, "Bash(git *)", "deny");
    const operatorEnv = { TURNSTREAM_PREFIX: space.logPrefix, REDIS_URL: acl.url("operator"), TURNSTREAM_USER: "olga" };
    const readerEnv = { ...operatorEnv, REDIS_URL: acl.url("reader") };

    const unknown = await cli(["rules", "revoke", "Bash(nope)"], operatorEnv);
    assert.equal(unknown.code, 2);
    assert.match(
      unknown.stderr,
      /no trust rule has the id or pattern "Bash\(nope\)"; list them with `turnstream rules list`/,
    );
    const ambiguous = await cli(["rules", "revoke", "Bash(git *)"], operatorEnv);
    assert.equal(ambiguous.code, 2);
    assert.match(ambiguous.stderr, /names 2 rules: .*\(allow\).*\(deny\).*revoke one by its id/);
    const nowhere = await cli(["rules", "revoke", allow.id], operatorEnv);
    assert.equal(nowhere.code, 2);
    assert.match(nowhere.stderr, /was not added by a decision in a session: name a session .* \(--session S\)/);

    // The reader lists, but may not revoke, and is told which role to use; nothing changed.
    assert.equal((await cli(["rules", "list"], readerEnv)).code, 0);
    const refused = await cli(["rules", "revoke", allow.id, "--session", session], readerEnv);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /may not revoke rules \(Redis said: NOPERM.*operator role/);
    assert.equal(await worker.hexists(rulesKey(space.logPrefix), allow.id), 1);

    // The operator role has every permission revoking takes: the record, then the rule's removal.
    const done = await cli(["rules", "revoke", allow.id, "--session", session, "--json"], operatorEnv);
    assert.equal(done.code, 0, done.stderr);
    const result = JSON.parse(done.stdout) as { session: string; removed: boolean; revoked: RuleRevoked };
    assert.deepEqual(
      [result.session, result.removed, result.revoked.by, result.revoked.keyId],
      [session, true, "olga", undefined],
    );
    assert.equal(await worker.hexists(rulesKey(space.logPrefix), allow.id), 0);
    const kinds: string[] = [];
    for await (const event of createEventLog({ redis: worker, prefix: space.logPrefix }).read(session))
      kinds.push(event.kind);
    assert.deepEqual(kinds, ["turn.queued", "rule.revoked"]);

    // The operator role also wrote the index of recent revocations; the reader reads it and cannot write it.
    const recent = await cli(["rules", "list", "--revoked", "--json"], readerEnv);
    assert.equal(recent.code, 0, recent.stderr);
    const listed = JSON.parse(recent.stdout) as { revocations: Array<{ ruleId: string; revokedBy: string }> };
    assert.deepEqual(
      listed.revocations.map((row) => [row.ruleId, row.revokedBy]),
      [[allow.id, "olga"]],
    );
    const reader = acl.client("reader");
    await assert.rejects(reader.lpush(revokedKey(space.logPrefix), "{}"), /NOPERM/);
    await assert.rejects(reader.ltrim(revokedKey(space.logPrefix), 0, 0), /NOPERM/);
    assert.equal(await worker.llen(revokedKey(space.logPrefix)), 1);
  } finally {
    await acl.close();
    space.cleanup();
  }
});
