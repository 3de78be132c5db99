// `turnstream tenants` against a real Redis, run as a process: set signs a record the workers'
// check accepts, list shows it (text and --json) with what the ledger counted, clear removes it;
// records that do not verify (another key, an edited budget, garbage) are shown so, unchecked
// without TURNSTREAM_OPERATOR_KEYS; every bad value is refused by its flag with nothing written; and
// names someone wrote to Redis by hand (control characters, a secret's shape) are never printed raw.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  limitsFromRecord,
  readLimitsRecord,
  signTenantLimits,
  TenantLedger,
  tenantLimitsKey,
  tenantsSeenKey,
  writeLimits,
  type TenantRow,
} from "../../src/tenants/index.ts";
import { OPERATOR, operatorKey, operatorKeyFile, stranger, trustedKeys } from "../support/operator-keys.ts";
import { cleanupKeys, redisFor, testSpace } from "../worker/_support.ts";
import { onlyJson, turnstream } from "./_cli.ts";

const keyFile = operatorKeyFile(mkdtempSync(join(tmpdir(), "ts-tenants-")));

type ListJson = { verifiedWith: string | null; tenants: TenantRow[] };

/** The command's environment: a private prefix, the operator's keys trusted unless `trusted` says otherwise. */
function envOf(prefix: string, trusted: string | undefined = OPERATOR.publicKey): Record<string, string> {
  return { TURNSTREAM_PREFIX: prefix, TURNSTREAM_OPERATOR_KEYS: trusted ?? "", TURNSTREAM_OPERATOR_KEY: "" };
}

const rowOf = (list: ListJson, tenant: string): TenantRow | undefined => list.tenants.find((r) => r.tenant === tenant);

test("tenants set signs limits the workers' check accepts; list shows them with the ledger's figures, text and --json; clear removes them", async () => {
  const space = testSpace();
  const redis = redisFor();
  const env = envOf(space.logPrefix);
  const ledger = new TenantLedger(redis, space.logPrefix);
  try {
    const empty = await turnstream(["tenants"], env);
    assert.equal(empty.code, 0, empty.stderr);
    assert.match(empty.stdout, /^no tenants: /);

    const set = await turnstream(
      ["tenants", "set", "acme/api", "--budget-usd", "2", "--max-running", "3", "--over-budget", "fail"],
      { ...env, TURNSTREAM_OPERATOR_KEY: keyFile, TURNSTREAM_USER: "dana" },
    );
    assert.equal(set.code, 0, set.stderr);
    assert.equal(
      set.stdout,
      `tenant acme/api: budget $2.00 per 24 hours, at most 3 running, over budget: fail; signed with ${operatorKey.keyId} by dana\n`,
    );
    // What a worker trusting the operator's key makes of the stored record.
    const verdict = limitsFromRecord(
      "acme/api",
      await readLimitsRecord(redis, space.logPrefix, "acme/api"),
      trustedKeys,
    );
    assert.deepEqual(
      { ...verdict, version: undefined },
      { ok: true, signed: true, limits: { budgetUsd: 2, maxRunning: 3, overBudget: "fail" }, version: undefined },
    );

    // The tenant spends past its budget; another runs one turn and has no limits of its own.
    await ledger.spend("acme/api", "call-1", 0.5);
    await ledger.spend("acme/api", "call-2", 1.75);
    await ledger.spend("acme/api", "call-2", 1.75);
    assert.equal((await ledger.reserve("beta", "lease-1", 60_000, { overBudget: "wait" })).status, "ok");

    const listed = await turnstream(["tenants", "list", "--json"], env);
    assert.equal(listed.code, 0, listed.stderr);
    const list = onlyJson(listed.stdout) as ListJson;
    assert.equal(list.verifiedWith, "TURNSTREAM_OPERATOR_KEYS");
    const acme = rowOf(list, "acme/api")!;
    assert.ok(Math.abs(Date.now() - Date.parse(acme.setAt!)) < 60_000, `set at ${acme.setAt}`);
    assert.deepEqual(list.tenants, [
      {
        tenant: "acme/api",
        nameValid: true,
        budgetUsd: 2,
        spentUsd: 2.25,
        budgetPct: 112.5,
        running: 0,
        maxRunning: 3,
        overBudgetPolicy: "fail",
        overBudget: true,
        limits: "verified",
        problem: null,
        setBy: "dana",
        setAt: acme.setAt,
        keyId: operatorKey.keyId,
      },
      {
        tenant: "beta",
        nameValid: true,
        budgetUsd: null,
        spentUsd: 0,
        budgetPct: null,
        running: 1,
        maxRunning: null,
        overBudgetPolicy: null,
        overBudget: null,
        limits: "none",
        problem: null,
        setBy: null,
        setAt: null,
        keyId: null,
      },
    ]);

    const text = await turnstream(["tenants"], env);
    assert.equal(text.code, 0, text.stderr);
    const [header, acmeLine, betaLine, ...rest] = text.stdout.trimEnd().split("\n");
    assert.deepEqual(rest, []);
    assert.match(header!, /^TENANT +BUDGET\/24H +SPENT\/24H +RUNNING +IF OVER BUDGET +LIMITS$/);
    assert.match(
      acmeLine!,
      new RegExp(
        String.raw`^acme/api +\$2\.00 +\$2\.25 \(112\.5%, over\) +0/3 +fail +verified \(${operatorKey.keyId}, set by dana at ${acme.setAt!.replace(/\./g, "\\.")}\)$`,
      ),
    );
    assert.match(betaLine!, /^beta +default +\$0\.00 +1\/default +default +none: the workers' defaults/);

    // Without the fleet's keys here the record is shown, and said to be unchecked.
    const unchecked = onlyJson(
      (await turnstream(["tenants", "--json"], envOf(space.logPrefix, ""))).stdout,
    ) as ListJson;
    assert.equal(unchecked.verifiedWith, null);
    assert.deepEqual(
      { limits: rowOf(unchecked, "acme/api")!.limits, budgetUsd: rowOf(unchecked, "acme/api")!.budgetUsd },
      { limits: "unchecked", budgetUsd: 2 },
    );
    assert.match((await turnstream(["tenants"], envOf(space.logPrefix, ""))).stdout, /acme\/api .* unchecked: /);

    const signing = { ...env, TURNSTREAM_OPERATOR_KEY: keyFile, TURNSTREAM_USER: "dana" };
    const cleared = await turnstream(["tenants", "clear", "acme/api", "--json"], signing);
    assert.equal(cleared.code, 0, cleared.stderr);
    assert.deepEqual(onlyJson(cleared.stdout), { tenant: "acme/api", cleared: true });
    // Cleared by a signed record, which a worker takes as "the defaults" (a deleted one it would not).
    const afterClear = limitsFromRecord(
      "acme/api",
      await readLimitsRecord(redis, space.logPrefix, "acme/api"),
      trustedKeys,
      { overBudget: "wait" },
    );
    assert.deepEqual(
      { ...afterClear, version: undefined },
      {
        ok: true,
        signed: true,
        limits: { overBudget: "wait" },
        version: undefined,
      },
    );
    const again = await turnstream(["tenants", "clear", "acme/api"], signing);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /^tenant acme\/api had no limits of its own; nothing changed$/m);
    const after = onlyJson((await turnstream(["tenants", "--json"], env)).stdout) as ListJson;
    assert.equal(rowOf(after, "acme/api")!.budgetUsd, null);
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});

test("records that do not verify are shown so, with their limits withheld: another key, an edited budget, not a record at all", async () => {
  const space = testSpace();
  const redis = redisFor();
  const env = envOf(space.logPrefix);
  try {
    const at = new Date().toISOString();
    await writeLimits(
      redis,
      space.logPrefix,
      signTenantLimits(stranger, { tenant: "stranger", budgetUsd: 1000, overBudget: "wait", by: "mallory", at }),
    );
    const signed = signTenantLimits(operatorKey, { tenant: "edited", budgetUsd: 1, overBudget: "fail", by: "ops", at });
    await redis.hset(tenantLimitsKey(space.logPrefix), "edited", JSON.stringify({ ...signed, budgetUsd: 1000 }));
    await redis.hset(tenantLimitsKey(space.logPrefix), "garbage", "{not json");
    await writeLimits(
      redis,
      space.logPrefix,
      signTenantLimits(operatorKey, { tenant: "fine", maxRunning: 2, overBudget: "wait", by: "ops", at }),
    );

    const list = onlyJson((await turnstream(["tenants", "--json"], env)).stdout) as ListJson;
    const checks = Object.fromEntries(list.tenants.map((row) => [row.tenant, [row.limits, row.problem]]));
    assert.deepEqual(checks, {
      edited: ["fails", "the signature of tenant edited's limits does not match"],
      fine: ["verified", null],
      garbage: ["fails", "the limits stored for tenant garbage are not a valid record"],
      stranger: [
        "fails",
        `tenant stranger's limits are signed by ${stranger.keyId}, not one of this worker's operator keys`,
      ],
    });
    for (const row of list.tenants.filter((r) => r.limits === "fails"))
      assert.deepEqual(
        [row.budgetUsd, row.maxRunning, row.overBudgetPolicy, row.overBudget, row.setBy],
        [null, null, null, null, null],
        `${row.tenant}: a forged record's claims are not shown as its limits`,
      );

    const text = await turnstream(["tenants"], env);
    assert.equal(text.code, 0, text.stderr);
    assert.match(
      text.stdout,
      /^edited +– +\$0\.00 +0\/– +– +DOES NOT VERIFY: the signature of tenant edited's limits does not match; workers fail its turns \(tenant_limits\)$/m,
    );
    assert.match(text.stdout, /^stranger .*DOES NOT VERIFY: .*signed by op-/m);
    assert.doesNotMatch(text.stdout, /\$1000/, "the forged budget is not shown as a budget");
    assert.match(text.stdout, /^fine +none +\$0\.00 +0\/2 +wait +verified/m);
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});

test("bad values are refused by their flag, with what to give instead, and nothing is written", async () => {
  const space = testSpace();
  const redis = redisFor();
  const env = { ...envOf(space.logPrefix), TURNSTREAM_OPERATOR_KEY: keyFile };
  const refusals: Array<[string[], RegExp, Record<string, string>?]> = [
    [["--budget-usd", "abc"], /--budget-usd must be a number of USD above 0, like 50 or 12\.5 \(got "abc"\)/],
    [["--budget-usd", "0"], /--budget-usd must be a number of USD above 0/],
    [["--budget-usd=-5"], /--budget-usd must be a number of USD above 0/],
    [["--budget-usd", "1e3"], /--budget-usd must be .*\(got "1e3"\)/],
    [["--budget-usd", "Infinity"], /--budget-usd must be/],
    [["--max-running", "0"], /--max-running must be a whole number of turns from 1 to 1000000, like 4 \(got "0"\)/],
    [["--max-running", "1.5"], /--max-running must be a whole number/],
    [["--max-running", "2000000"], /--max-running must be a whole number/],
    [["--over-budget", "maybe"], /--over-budget is wait \(.*\) or fail \(.*\), not "maybe"/],
    [["--by", "dana\u001b[2J"], /--by holds a control or invisible character \(\\x1b\); give a plain name/],
    [["--by", "sk-ant-api03-abcdefghijklmnop"], /--by looks like a secret; give a name/],
    [
      ["--budget-usd", "5"],
      /set TURNSTREAM_OPERATOR_KEY to your private key file \(or pass --key FILE\)/,
      { TURNSTREAM_OPERATOR_KEY: "" },
    ],
    [
      ["--budget-usd", "5"],
      new RegExp(
        `your key ${operatorKey.keyId} is not one of TURNSTREAM_OPERATOR_KEYS: workers that trust only those keys would fail`,
      ),
      { TURNSTREAM_OPERATOR_KEYS: stranger.publicKey },
    ],
  ];
  try {
    for (const [flags, message, extraEnv] of refusals) {
      const refused = await turnstream(["tenants", "set", "acme", ...flags], { ...env, ...extraEnv });
      assert.equal(refused.code, 2, `${flags.join(" ")}: ${refused.stderr}`);
      assert.match(refused.stderr, message, flags.join(" "));
      assert.equal(refused.stdout, "");
    }
    for (const [args, message] of [
      [["tenants", "list", "--budget-usd", "5"], /--budget-usd applies only to `tenants set`/],
      [["tenants", "clear", "acme", "--budget-usd", "5"], /--budget-usd applies only to `tenants set`/],
      [["tenants", "list", "--key", keyFile], /--key applies only to `tenants set` and `tenants clear`/],
      [["tenants", "set"], /usage: turnstream tenants/],
      [["tenants", "remove", "acme"], /usage: turnstream tenants/],
    ] as Array<[string[], RegExp]>) {
      const refused = await turnstream(args, env);
      assert.equal(refused.code, 2, `${args.join(" ")}: ${refused.stderr}`);
      assert.match(refused.stderr, message);
    }
    assert.equal(await redis.exists(tenantLimitsKey(space.logPrefix)), 0, "nothing was written");
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});

test("names written to Redis by hand are never printed raw: control characters escaped, a secret's shape scrubbed; such names are refused as arguments", async () => {
  const space = testSpace();
  const redis = redisFor();
  const env = envOf(space.logPrefix);
  const hostile = "evil\u001b]0;owned\u0007\u202e";
  const github = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
  const anthropic = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz";
  try {
    await redis.zadd(tenantsSeenKey(space.logPrefix), Date.now(), hostile, Date.now(), github);
    await writeLimits(
      redis,
      space.logPrefix,
      signTenantLimits(operatorKey, {
        tenant: anthropic,
        budgetUsd: 1,
        overBudget: "wait",
        by: "ops",
        at: new Date().toISOString(),
      }),
    );
    const text = await turnstream(["tenants"], env);
    const json = await turnstream(["tenants", "--json"], env);
    const status = await turnstream(["status"], { ...env, TURNSTREAM_QUEUE_PREFIX: space.queuePrefix });
    const statusJson = await turnstream(["status", "--json"], { ...env, TURNSTREAM_QUEUE_PREFIX: space.queuePrefix });
    for (const [what, run] of Object.entries({ text, json, status, statusJson })) {
      assert.equal(run.code, 0, `${what}: ${run.stderr}`);
      const said = run.stdout + run.stderr;
      assert.doesNotMatch(
        said,
        /[\u0000-\u0008\u000b-\u001f\u007f\u202e]/,
        `${what}: no raw control or bidi character`,
      );
      assert.ok(!said.includes("\\u001b"), `${what}: not even as a JSON escape a terminal tool would decode`);
      assert.ok(
        !said.includes(github.slice(4)) && !said.includes(anthropic.slice(7)),
        `${what}: no secret-shaped name`,
      );
      assert.match(said, /\[REDACTED:github_token\]/, what);
      assert.match(said, /\[REDACTED:anthropic_key\]/, what);
    }
    assert.match(
      text.stdout,
      /^evil\\x1b\]0;owned\\x07\\u202e \(not a valid tenant name: written to Redis by hand\) /m,
    );
    const rows = (onlyJson(json.stdout) as ListJson).tenants;
    // In the order of their stored names: evil…, ghp_…, sk-ant-….
    assert.deepEqual(
      rows.map((row) => [row.tenant, row.nameValid, row.limits]),
      [
        ["evil\\x1b]0;owned\\x07\\u202e", false, "none"],
        ["[REDACTED:github_token]", true, "none"],
        ["[REDACTED:anthropic_key]", true, "verified"],
      ],
    );

    // As arguments: refused, a secret's shape without repeating it, a control character escaped.
    const secretSet = await turnstream(["tenants", "set", github, "--budget-usd", "5", "--key", keyFile], env);
    assert.equal(secretSet.code, 2);
    assert.match(
      secretSet.stderr,
      /the tenant name looks like a secret \(github_token\), so it is neither repeated here nor used/,
    );
    assert.ok(!(secretSet.stdout + secretSet.stderr).includes(github.slice(4)));
    const controlClear = await turnstream(["tenants", "clear", "bad\u001bname"], env);
    assert.equal(controlClear.code, 2);
    assert.match(controlClear.stderr, /"bad\\u001bname" is not a tenant name/);
    assert.doesNotMatch(controlClear.stderr, /\u001b/);
    const statusTenant = await turnstream(["status", "--tenant", anthropic], env);
    assert.equal(statusTenant.code, 2);
    assert.match(statusTenant.stderr, /--tenant: the tenant name looks like a secret \(anthropic_key\)/);
    assert.equal(await redis.hexists(tenantLimitsKey(space.logPrefix), github), 0);
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});
