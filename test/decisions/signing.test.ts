// Operator keys, signatures over decisions and rules, and the pure pieces of supervised runs (what a
// redaction is, which tools are supervised, which pre-approvals are dropped). No CLI, little Redis.
import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  filterAllowedTools,
  foldDecisions,
  generateOperatorKey,
  InvalidRuleError,
  loadOperatorKey,
  matcherFor,
  operatorKeyLinesFromEnv,
  OperatorKeyError,
  OperatorKeysMissingError,
  parseOperatorKeys,
  requestDigest,
  ruleId,
  RuleStore,
  scrubReport,
  signDecision,
  signRule,
  startDecisionHub,
  supervisedTools,
  toolSpecs,
  verifyDecision,
  verifyRule,
  writeOperatorKeyFile,
  type DecisionRequested,
  type UnsignedDecision,
} from "../../src/decisions/index.ts";
import type { Envelope } from "../../src/log/index.ts";
import { createScrubber } from "../../src/telemetry/index.ts";
import { operatorKey, OPERATOR, setup, stranger, trustedKeys } from "./_support.ts";

const request: DecisionRequested = {
  requestId: "dr-1",
  nonce: "n".repeat(32),
  tool: "Bash",
  riskClass: "exec",
  input: "make deploy",
  subject: "make deploy",
  hubId: "hub-1",
  timeoutMs: 1000,
  expiresAt: "2026-01-01T00:00:00.000Z",
};
const digest = requestDigest("s1", request);
const allow: UnsignedDecision = {
  requestId: "dr-1",
  decision: "allow",
  by: "alice",
  source: "operator",
  reason: "ok",
  decidedAt: "2026-01-01T00:00:00.000Z",
  requestDigest: digest,
};

test("operator key files: 0600, never overwritten, refused when others can read them; public keys parse with names and comments", () => {
  const dir = mkdtempSync(join(tmpdir(), "ts-keys-"));
  try {
    const file = join(dir, "sub", "operator.key");
    const key = generateOperatorKey();
    assert.match(key.publicKey, /^ed25519:[A-Za-z0-9_-]{43}$/);
    assert.match(key.keyId, /^op-[0-9a-f]{16}$/);
    writeOperatorKeyFile(file, key.privateKeyPem);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.throws(() => writeOperatorKeyFile(file, key.privateKeyPem), /already exists/);
    const loaded = loadOperatorKey(file);
    assert.deepEqual([loaded.keyId, loaded.publicKey], [key.keyId, key.publicKey]);
    chmodSync(file, 0o644);
    assert.throws(
      () => loadOperatorKey(file),
      (e: unknown) => e instanceof OperatorKeyError && /chmod 600/.test(e.message),
    );
    assert.throws(() => loadOperatorKey(join(dir, "missing.key")), /TURNSTREAM_OPERATOR_KEY/);

    const ring = parseOperatorKeys(`# fleet operators\n${key.publicKey} alice\n\n${OPERATOR.publicKey}  # bob's\n`);
    assert.equal(ring.size, 2);
    assert.equal(ring.nameOf(key.keyId), "alice");
    assert.throws(() => parseOperatorKeys("ssh-ed25519 AAAA"), /ed25519:<43 base64url characters> \[name\]/);
    assert.throws(() => parseOperatorKeys(`${key.publicKey} two names`), OperatorKeyError);

    const list = join(dir, "operators.pub");
    writeFileSync(list, `${key.publicKey} alice\n`);
    assert.deepEqual(operatorKeyLinesFromEnv(list), [`${key.publicKey} alice`, ""]);
    assert.deepEqual(operatorKeyLinesFromEnv(`${key.publicKey},${OPERATOR.publicKey}`), [
      key.publicKey,
      OPERATOR.publicKey,
    ]);
    assert.equal(operatorKeyLinesFromEnv(" "), undefined);
    assert.throws(() => operatorKeyLinesFromEnv(join(dir, "nope")), /TURNSTREAM_OPERATOR_KEYS names/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a decision's signature covers every field, its session and its request; only a trusted key counts", () => {
  const signed = signDecision(operatorKey, "s1", allow);
  assert.deepEqual(verifyDecision(trustedKeys, "s1", signed, digest), { ok: true, keyId: operatorKey.keyId });
  const tampered: Array<[string, Record<string, unknown>]> = [
    ["decision", { decision: "deny" }],
    ["by", { by: "mallory" }],
    ["reason", { reason: "" }],
    ["decidedAt", { decidedAt: "2027-01-01T00:00:00.000Z" }],
    ["always", { always: true }],
    ["ruleId", { ruleId: "rule-x" }],
    ["allowRedacted", { allowRedacted: true }],
    ["requestId", { requestId: "dr-2" }],
  ];
  for (const [field, patch] of tampered) {
    assert.deepEqual(
      verifyDecision(trustedKeys, "s1", { ...signed, ...patch }, digest),
      { ok: false, why: "its signature does not match" },
      field,
    );
  }
  assert.equal(verifyDecision(trustedKeys, "s2", signed, digest).ok, false, "another session");
  assert.match(
    String(
      (
        verifyDecision(trustedKeys, "s1", signed, requestDigest("s1", { ...request, input: "make test" })) as {
          why: string;
        }
      ).why,
    ),
    /different request/,
  );
  assert.match(
    String((verifyDecision(trustedKeys, "s1", signDecision(stranger, "s1", allow), digest) as { why: string }).why),
    /not one of this worker's operator keys/,
  );
  assert.match(String((verifyDecision(trustedKeys, "s1", { ...allow }, digest) as { why: string }).why), /not signed/);
  assert.match(
    String((verifyDecision(trustedKeys, "s1", { ...signed, source: "timeout" }, digest) as { why: string }).why),
    /only the hub itself records/,
  );
});

test("rules: signed by a trusted key with the id their effect and pattern give; RuleStore refuses unsigned ones", async () => {
  const rule = signRule(operatorKey, {
    id: ruleId("allow", "Bash(git status)"),
    pattern: "Bash(git status)",
    effect: "allow",
    by: "carol",
    at: "2026-01-01T00:00:00Z",
  });
  assert.equal(verifyRule(trustedKeys, rule).ok, true);
  assert.deepEqual(verifyRule(trustedKeys, { ...rule, pattern: "Bash(git *)", id: ruleId("allow", "Bash(git *)") }), {
    ok: false,
    why: "its signature does not match",
  });
  assert.deepEqual(verifyRule(trustedKeys, { ...rule, effect: "deny" }), {
    ok: false,
    why: "its id does not match its effect and pattern",
  });
  assert.equal(verifyRule(trustedKeys, signRule(stranger, rule)).ok, false);
  const { keyId: _k, signature: _s, ...unsigned } = rule;
  assert.deepEqual(verifyRule(trustedKeys, unsigned), { ok: false, why: "it is not signed" });
  const ctx = await setup();
  try {
    await assert.rejects(
      new RuleStore(ctx.redis, ctx.prefix).put(unsigned),
      (e: unknown) => e instanceof InvalidRuleError && /signRule/.test(e.message),
    );
  } finally {
    await ctx.cleanup();
  }
});

test("a hub without operator keys refuses to start, naming TURNSTREAM_OPERATOR_KEYS", async () => {
  const ctx = await setup();
  try {
    for (const operatorKeys of [undefined, [], ["# nobody yet"]]) {
      await assert.rejects(
        startDecisionHub({ log: ctx.log, redis: ctx.redis, prefix: ctx.prefix, operatorKeys }),
        (thrown: unknown) =>
          thrown instanceof OperatorKeysMissingError &&
          /TURNSTREAM_OPERATOR_KEYS/.test(thrown.message) &&
          /operator-key new/.test(thrown.message),
      );
    }
  } finally {
    await ctx.cleanup();
  }
});

test("the folded decision state counts an operator's decision only when signed (and checks it given the keys)", () => {
  const env = (seq: number, kind: string, data: unknown): Envelope =>
    ({
      v: 1,
      seq,
      session: "s1",
      turn: "t1",
      attempt: 1,
      epoch: seq === 1 ? 1 : 0,
      at: "2026-01-01T00:00:00Z",
      kind,
      data,
    }) as Envelope;
  const unsigned = env(2, "decision.made", allow);
  const foreign = env(3, "decision.made", signDecision(stranger, "s1", { ...allow, by: "mallory" }));
  const real = env(4, "decision.made", signDecision(operatorKey, "s1", { ...allow, decision: "deny" }));
  const events = [env(1, "decision.requested", request), unsigned, foreign, real];
  assert.equal(foldDecisions(events).requests["dr-1"]!.made?.by, "mallory", "without keys: the first signed one");
  assert.equal(
    foldDecisions(events, undefined, trustedKeys).requests["dr-1"]!.made?.decision,
    "deny",
    "with keys: the first trusted one",
  );
});

test("scrubReport names what the scrubber took out, never counting markers that were already there", () => {
  const scrubber = createScrubber({ env: {} });
  assert.deepEqual(scrubReport("ls -la", scrubber), { text: "ls -la", redacted: [] });
  const report = scrubReport("psql postgres://app:$(touch${IFS}pwned)@db/app", scrubber);
  assert.deepEqual(report.redacted, ["connection_password"]);
  assert.doesNotMatch(report.text, /touch/);
  assert.deepEqual(scrubReport("echo [REDACTED:connection_password]", scrubber).redacted, []);
  assert.deepEqual(scrubReport("secret here", { scrub: (t) => t.replace("secret", "xxx") }).redacted, ["scrubbed"]);
  assert.deepEqual(scrubReport("anything", undefined).redacted, []);
});

test("supervised tools: riskyTools adds, unsupervisedTools removes (logged), MCP always; pre-approvals are split like the CLI splits them", () => {
  const warned: Array<[unknown, string | undefined]> = [];
  const logger = { debug() {}, info() {}, error() {}, warn: (o: object, m?: string) => void warned.push([o, m]) };
  assert.deepEqual(supervisedTools({ riskyTools: ["Read", "Bash"] }), [
    "Bash",
    "Monitor",
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    "WebFetch",
    "Read",
  ]);
  assert.deepEqual(supervisedTools({ unsupervisedTools: ["Bash", "WebFetch", "Glob"], logger }), [
    "Monitor",
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
  ]);
  assert.deepEqual(
    warned.map(([o, m]) => [(o as { tool: string }).tool, /shell tool is NOT supervised/.test(m!)]),
    [
      ["Bash", true],
      ["WebFetch", false],
      ["Glob", false],
    ],
  );
  const matcher = matcherFor(supervisedTools({}));
  assert.deepEqual(toolSpecs(["Read,Bash", "Glob Grep", "Bash(git log:*, x)"]), [
    "Read",
    "Bash",
    "Glob",
    "Grep",
    "Bash(git log:*, x)",
  ]);
  assert.deepEqual(
    filterAllowedTools(
      ["Read,Bash", "Glob Monitor", "bash", "mcp__srv", "mcp__srv__tool", "Bash(git status:*)", "*", "WebSearch"],
      matcher,
    ),
    ["Read", "Glob", "WebSearch"],
  );
});
