// Import/export round trip of a recorded CLI run through the `turnstream import|export` commands.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  connectRedis,
  createEventLog,
  importFile,
  type Envelope,
  type EventLog,
  type RedisClient,
} from "../../src/log/index.ts";
import { rid } from "./contract.ts";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..", "..");
const bin = join(root, "src", "bin", "turnstream.ts");
const redisUrl = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379";

/** A recorded stream-json run: a fixture when the repo has one, else a generated one. */
function recording(dir: string): string {
  const fixtures = join(root, "test", "fixtures", "cli");
  if (existsSync(fixtures)) {
    const firstFixture = readdirSync(fixtures)
      .filter((n) => n.endsWith(".jsonl"))
      .sort()[0];
    if (firstFixture !== undefined) return join(fixtures, firstFixture);
  }
  const sid = "0d6c4a52-3b1e-4f7a-9a8e-5c2d1b0e9f11";
  const lines = [
    JSON.stringify({
      type: "system",
      subtype: "init",
      session_id: sid,
      tools: ["Bash", "Read"],
      model: "claude-sonnet-4-5",
    }),
    JSON.stringify({
      type: "assistant",
      message: { id: "msg_1", role: "assistant", content: [{ type: "text", text: "Let me look. ünïcödé ✓" }] },
      parent_tool_use_id: null,
      session_id: sid,
    }),
    JSON.stringify({
      type: "assistant",
      message: {
        id: "msg_1",
        role: "assistant",
        content: [{ type: "tool_use", id: "toolu_1", name: "Bash", input: { command: "ls" } }],
      },
      session_id: sid,
    }),
    JSON.stringify({
      type: "user",
      message: {
        role: "user",
        content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "a\nb\n".repeat(80_000) }],
      },
      session_id: sid,
    }),
    '{"type":"system","subtype":"api_retry","attempt":1}\r',
    "",
    JSON.stringify({
      type: "result",
      subtype: "success",
      is_error: false,
      result: "done",
      session_id: sid,
      usage: { input_tokens: 10, output_tokens: 5 },
    }),
  ];
  const file = join(dir, "recorded-run.jsonl");
  writeFileSync(file, lines.join("\n") + "\n");
  return file;
}

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], {
      env: { ...process.env, REDIS_URL: redisUrl, REDIS_CLUSTER_NODES: "" },
      maxBuffer: 64 * 1024 * 1024,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const failure = err as { code: number; stdout: string; stderr: string };
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr };
  }
}

describe("import/export", () => {
  let dir: string;
  let redis: RedisClient;
  let log: EventLog;
  const prefix = `test:${rid()}:`;
  const s1 = `rec-${rid()}`;
  const s2 = `copy-${rid()}`;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), "turnstream-jsonl-"));
    redis = connectRedis({ url: redisUrl, env: {} });
    log = createEventLog({ redis, prefix });
  });
  after(async () => {
    await log.destroy(s1);
    await log.destroy(s2);
    await redis.del(`${prefix}sessions`);
    redis.disconnect();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a raw CLI recording imports line by line, exports, and re-imports with the same seqs", async () => {
    const file = recording(dir);
    const original = readFileSync(file, "utf8");
    const lines = original.endsWith("\n") ? original.slice(0, -1).split("\n") : original.split("\n");

    const imp = await cli(["import", s1, file, "--prefix", prefix, "--turn", "rec-1"]);
    assert.equal(imp.code, 0, imp.stderr);
    const evs: Envelope[] = [];
    for await (const event of log.read(s1)) evs.push(event);
    assert.equal(evs.length, lines.length);
    assert.ok(evs.every((e) => e.kind === "cli.line" && e.turn === "rec-1" && e.attempt === 1 && e.epoch === 1));
    assert.deepEqual(
      evs.map((e) => (e.data as { raw: string }).raw),
      lines,
      "every line exactly, \\r and empty lines included",
    );

    const out1 = join(dir, "export-1.jsonl");
    const exp = await cli(["export", s1, out1, "--prefix", prefix]);
    assert.equal(exp.code, 0, exp.stderr);
    const exported = readFileSync(out1, "utf8")
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as Envelope);
    assert.deepEqual(
      exported.map((e) => e.seq),
      lines.map((_, i) => i + 1),
    );
    assert.equal(
      exported.map((e) => (e.data as { raw: string }).raw).join("\n") + "\n",
      original.endsWith("\n") ? original : original + "\n",
    );

    const re = await cli(["import", s2, out1, "--prefix", prefix]);
    assert.equal(re.code, 0, re.stderr);
    const exp2 = await cli(["export", s2, "--prefix", prefix]);
    assert.equal(exp2.code, 0, exp2.stderr);
    const copy = exp2.stdout
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as Envelope);
    assert.deepEqual(
      copy.map(({ session: _s, ...rest }) => rest),
      exported.map(({ session: _s, ...rest }) => rest),
    );
    assert.ok(copy.every((e) => e.session === s2));
    // The imported session's epoch counter continues above the imported epochs.
    assert.equal((await log.beginAttempt(s2, "next")).epoch, 2);

    const again = await cli(["import", s1, file, "--prefix", prefix]);
    assert.equal(again.code, 2, "a session that has events is a usage error: import into a new id");
    assert.match(again.stderr, /already has \d+ events/);
    assert.equal((await log.stat(s1)).lastSeq, lines.length, "a refused import wrote nothing");
  });

  it("import in small batches: leading blank lines are skipped, seqs and epochs kept; a gap or a mixed file is refused", async () => {
    const source = `src-${rid()}`;
    const { epoch, attempt } = await log.beginAttempt(source, "t1");
    await log.append(
      source,
      epoch,
      [1, 2, 3, 4, 5].map((i) => ({ turn: "t1", attempt, kind: "cli.line", data: { raw: `line ${i}` } })),
    );
    const envelopes: Envelope[] = [];
    for await (const event of log.read(source)) envelopes.push(event);
    const text = (es: Envelope[]): string => es.map((e) => JSON.stringify(e)).join("\n") + "\n";
    const good = join(dir, "small-batches.jsonl");
    writeFileSync(good, "\n\n" + text(envelopes));
    const copy = `batches-${rid()}`;
    const gap = `gap-${rid()}`;
    const mixed = `mixed-${rid()}`;
    try {
      assert.deepEqual(await importFile(log, copy, good, { batchEvents: 2 }), {
        mode: "envelopes",
        count: 5,
        lastSeq: 5,
      });
      const copied: Envelope[] = [];
      for await (const event of log.read(copy)) copied.push(event);
      assert.deepEqual(
        copied.map((e) => [e.seq, e.epoch, e.data]),
        envelopes.map((e) => [e.seq, e.epoch, e.data]),
      );
      assert.equal(
        (await log.beginAttempt(copy, "next")).epoch,
        epoch + 1,
        "the epoch counter continues above the imported epochs",
      );

      const gapFile = join(dir, "gap.jsonl");
      writeFileSync(gapFile, text([envelopes[0]!, envelopes[2]!]));
      await assert.rejects(importFile(log, gap, gapFile), /expected seq 2 but found 3/);

      const mixedFile = join(dir, "mixed.jsonl");
      writeFileSync(mixedFile, text(envelopes.slice(0, 3)) + "not an envelope\n");
      await assert.rejects(importFile(log, mixed, mixedFile, { batchEvents: 2 }), /line 4 is not an envelope/);
      assert.equal((await log.stat(mixed)).lastSeq, 2, "the full batch before the bad line went in");
    } finally {
      for (const sessionId of [source, copy, gap, mixed]) await log.destroy(sessionId);
    }
  });

  it("export of an unknown session and bad arguments fail with a clear message", async () => {
    const missing = await cli(["export", `none-${rid()}`, "--prefix", prefix]);
    assert.equal(missing.code, 2, "an unknown session is a usage error");
    assert.match(missing.stderr, /has no events/);
    const bad = await cli(["import", "bad{id}", "x", "--prefix", prefix]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /session id must be/);
  });
});
