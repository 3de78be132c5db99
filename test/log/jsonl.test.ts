// Import/export round trip of a recorded CLI run through the `turnstream import|export` commands.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { connectRedis, createEventLog, type Envelope, type EventLog, type RedisClient } from "../../src/log/index.ts";
import { rid } from "./contract.ts";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..", "..");
const bin = join(root, "src", "bin", "turnstream.ts");
const redisUrl = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379";

/** A recorded stream-json run: a fixture when the repo has one, else a generated one. */
function recording(dir: string): string {
  const fixtures = join(root, "test", "fixtures", "cli");
  if (existsSync(fixtures)) {
    const f = readdirSync(fixtures).filter((n) => n.endsWith(".jsonl")).sort()[0];
    if (f !== undefined) return join(fixtures, f);
  }
  const sid = "0d6c4a52-3b1e-4f7a-9a8e-5c2d1b0e9f11";
  const lines = [
    JSON.stringify({ type: "system", subtype: "init", session_id: sid, tools: ["Bash", "Read"], model: "claude-sonnet-4-5" }),
    JSON.stringify({ type: "assistant", message: { id: "msg_1", role: "assistant", content: [{ type: "text", text: "Let me look. ünïcödé ✓" }] }, parent_tool_use_id: null, session_id: sid }),
    JSON.stringify({ type: "assistant", message: { id: "msg_1", role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "Bash", input: { command: "ls" } }] }, session_id: sid }),
    JSON.stringify({ type: "user", message: { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "a\nb\n".repeat(80_000) }] }, session_id: sid }),
    '{"type":"system","subtype":"api_retry","attempt":1}\r',
    "",
    JSON.stringify({ type: "result", subtype: "success", is_error: false, result: "done", session_id: sid, usage: { input_tokens: 10, output_tokens: 5 } }),
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
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
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
    for await (const e of log.read(s1)) evs.push(e);
    assert.equal(evs.length, lines.length);
    assert.ok(evs.every((e) => e.kind === "cli.line" && e.turn === "rec-1" && e.attempt === 1 && e.epoch === 1));
    assert.deepEqual(evs.map((e) => (e.data as { raw: string }).raw), lines, "every line exactly, \\r and empty lines included");

    const out1 = join(dir, "export-1.jsonl");
    const exp = await cli(["export", s1, out1, "--prefix", prefix]);
    assert.equal(exp.code, 0, exp.stderr);
    const exported = readFileSync(out1, "utf8").trimEnd().split("\n").map((l) => JSON.parse(l) as Envelope);
    assert.deepEqual(exported.map((e) => e.seq), lines.map((_, i) => i + 1));
    assert.equal(exported.map((e) => (e.data as { raw: string }).raw).join("\n") + "\n", original.endsWith("\n") ? original : original + "\n");

    const re = await cli(["import", s2, out1, "--prefix", prefix]);
    assert.equal(re.code, 0, re.stderr);
    const exp2 = await cli(["export", s2, "--prefix", prefix]);
    assert.equal(exp2.code, 0, exp2.stderr);
    const copy = exp2.stdout.trimEnd().split("\n").map((l) => JSON.parse(l) as Envelope);
    assert.deepEqual(copy.map(({ session: _s, ...rest }) => rest), exported.map(({ session: _s, ...rest }) => rest));
    assert.ok(copy.every((e) => e.session === s2));
    // The imported session's epoch counter continues above the imported epochs.
    assert.equal((await log.beginAttempt(s2, "next")).epoch, 2);

    const again = await cli(["import", s1, file, "--prefix", prefix]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /already has \d+ events/);
    assert.equal((await log.stat(s1)).lastSeq, lines.length, "a refused import wrote nothing");
  });

  it("export of an unknown session and bad arguments fail with a clear message", async () => {
    const missing = await cli(["export", `none-${rid()}`, "--prefix", prefix]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /has no events/);
    const bad = await cli(["import", "bad{id}", "x", "--prefix", prefix]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /session id must be/);
  });
});
