import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { once } from "node:events";
import * as samples from "./sample-lines.ts";

const bin = join(import.meta.dirname, "../../src/bin/turnstream.ts");

async function runParse(args: string[], stdin?: string): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, [bin, "parse", ...args], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
  child.stdin.end(stdin ?? "");
  const [code] = (await once(child, "close")) as [number | null];
  return { code, out, err };
}

test("turnstream parse FILE prints one JSON summary", async () => {
  const dir = mkdtempSync(join(tmpdir(), "parse-cmd-"));
  try {
    const file = join(dir, "run.jsonl");
    const big = JSON.stringify({
      type: "assistant",
      message: { id: "m", content: [{ type: "text", text: "z".repeat(5000) }] },
    });
    writeFileSync(
      file,
      [
        ...samples.toolsRun,
        "not json",
        big,
        samples.apiRetry(429, "rate_limit"),
        samples.synthetic("rate_limit", "x"),
        samples.apiErrorResult(429, "x"),
      ].join("\r\n"),
    );
    const { code, out } = await runParse(["--max-line-bytes", "4096", file]);
    assert.equal(code, 3, "a rate-limited run is infrastructure: exit 3, worth retrying");
    assert.equal(out.trim().split("\n").length, 1);
    const sum = JSON.parse(out);
    assert.equal(sum.lines, 14);
    assert.equal(sum.invalid, 1);
    assert.equal(sum.truncated, 1);
    assert.equal(sum.byType["system/init"], 1);
    assert.equal(sum.sessionId, samples.sid);
    assert.equal(sum.cliVersion, "2.1.332");
    assert.equal(sum.errorKind, "rate_limit");
    assert.deepEqual(
      sum.results.map((r: { errorKind: string }) => r.errorKind),
      ["ok", "rate_limit"],
    );
    assert.deepEqual(sum.bashCommands, ["ls -la"]);
    assert.equal(sum.toolCalls, 2);
    assert.equal(sum.toolResults, 2);
    assert.deepEqual(sum.unpairedToolCalls, []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("turnstream parse - reads stdin; a missing file is a clear error", async () => {
  const { code, out } = await runParse(["-"], [samples.init, samples.lostSession].join("\n") + "\n");
  assert.equal(code, 3, "a lost session is infrastructure");
  assert.equal(JSON.parse(out).errorKind, "lost_session");
  const missing = await runParse([join(tmpdir(), "no-such-dir-x", "f.jsonl")]);
  assert.equal(missing.code, 2, "a path that cannot be read is a usage error");
  assert.match(missing.err, /cannot read .*ENOENT/);
  assert.equal((await runParse([])).code, 2);
});

test("turnstream parse exits by the run's outcome: ok 0, max_turns 1 (the task failed), rate_limit 3", async () => {
  const ok = await runParse(["-"], samples.toolsRun.join("\n") + "\n");
  assert.equal(JSON.parse(ok.out).errorKind, "ok");
  assert.equal(ok.code, 0);
  const maxTurns = await runParse(["-"], [samples.init, samples.maxTurns].join("\n") + "\n");
  assert.equal(JSON.parse(maxTurns.out).errorKind, "max_turns");
  assert.equal(maxTurns.code, 1);
  const limited = await runParse(
    ["-"],
    [samples.init, samples.synthetic("rate_limit", "x"), samples.apiErrorResult(429, "x")].join("\n") + "\n",
  );
  assert.equal(JSON.parse(limited.out).errorKind, "rate_limit");
  assert.equal(limited.code, 3);
  const help = await runParse(["--help"]);
  assert.equal(help.code, 0);
  assert.match(help.out, /usage: turnstream parse/);
});
