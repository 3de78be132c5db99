// Warm processes and their pool against the real CLI and the scripted model server: several turns of
// one session in one process, tools, abort, a CLI that dies between turns, and the pool's limits.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClaudeCodeCliError } from "../../src/runner/index.ts";
import {
  startWarmProcess,
  warmFingerprint,
  type WarmProcess,
  type WarmProcessOptions,
} from "../../src/runner/warm-process.ts";
import { WarmPool } from "../../src/runner/warm-pool.ts";
import type { ParsedLine } from "../../src/protocol/index.ts";
import { startScriptedServer, type Step } from "./_model.ts";
import { alive, cmdline, hermeticEnv, treeMembers, waitUntil } from "./_support.ts";

const dir = (prefix: string): string => mkdtempSync(join(tmpdir(), prefix));

async function withServer(script: Step[], fn: (url: string) => Promise<void>): Promise<void> {
  const server = await startScriptedServer(script);
  try {
    await fn(server.url);
  } finally {
    await server.close();
  }
}

function options(url: string, extra: Partial<WarmProcessOptions> = {}): WarmProcessOptions {
  return {
    cwd: dir("ts-warm-cwd-"),
    env: hermeticEnv(url),
    killGraceMs: 1000,
    skipPermissions: true,
    sandboxed: true,
    ...extra,
  };
}

/** Runs one turn, collecting its lines. */
async function turn(
  warmProcess: WarmProcess,
  prompt: string,
): Promise<{ lines: ParsedLine[]; outcome: Awaited<ReturnType<WarmProcess["turn"]>> }> {
  const lines: ParsedLine[] = [];
  const outcome = await warmProcess.turn(prompt, { timeoutMs: 30_000, onLine: (l) => lines.push(l) });
  return { lines, outcome };
}

test("one warm process answers three turns of one session; the session file is complete at each result", async () => {
  await withServer([{ text: "answer-one" }, { text: "answer-two" }, { text: "answer-three" }], async (url) => {
    const configHome = { instanceId: "warm", instanceRoot: dir("ts-warm-homes-") };
    const warmProcess = startWarmProcess(options(url, { configHome }));
    try {
      let sizeBefore = 0;
      const ids = new Set<string>();
      for (const ordinal of ["one", "two", "three"]) {
        const { lines, outcome } = await turn(warmProcess, `question ${ordinal}`);
        assert.equal(lines[0]?.type, "system/init", "each turn starts with an init line");
        assert.equal(lines.at(-1)?.type, "result/success", "each turn's lines end at its result");
        assert.equal(lines.filter((l) => l.type.startsWith("result")).length, 1);
        assert.equal(outcome.resultText, `answer-${ordinal}`);
        assert.equal(outcome.lineCount, lines.length);
        assert.equal(outcome.pid, warmProcess.pid, "the same process answered");
        ids.add(outcome.sessionId!);
        const file = outcome.sessionFile;
        assert.ok(file !== undefined && file.length > sizeBefore, "the session file grew with the turn");
        assert.ok(file.toString("utf8").includes(`answer-${ordinal}`), "and already holds the turn's answer");
        sizeBefore = file.length;
        assert.equal(warmProcess.alive, true);
      }
      assert.equal(ids.size, 1, "one session id across the turns");
      assert.equal(warmProcess.sessionId, [...ids][0]);
      assert.ok(warmProcess.rssBytes() > 10 * 1024 * 1024, "the tree's resident memory is read from /proc");
    } finally {
      await warmProcess.close();
    }
    assert.equal(warmProcess.alive, false);
    assert.deepEqual(treeMembers(warmProcess.treeMarker), []);
  });
});

test("a turn with a tool call runs warm, after a plain one", async () => {
  const script: Step[] = [
    { text: "hello" },
    { tool: { name: "Bash", input: { command: "echo warm-made > made.txt", description: "write" } } },
    { text: "written" },
  ];
  await withServer(script, async (url) => {
    const runOptions = options(url);
    const warmProcess = startWarmProcess(runOptions);
    try {
      await turn(warmProcess, "hi");
      const { lines, outcome } = await turn(warmProcess, "write the file");
      assert.equal(outcome.resultText, "written");
      assert.ok(
        lines.some((l) => l.type === "user" && l.raw.includes("tool_result")),
        "the tool's result is among the turn's lines",
      );
      assert.equal(readFileSync(join(runOptions.cwd, "made.txt"), "utf8"), "warm-made\n");
    } finally {
      await warmProcess.close();
    }
  });
});

test("abort mid-turn ends the whole tree, slow Bash tool included, and the process is not reused", async () => {
  await withServer(
    [{ tool: { name: "Bash", input: { command: "echo begin; sleep 47", description: "slow" } } }, { hang: true }],
    async (url) => {
      const warmProcess = startWarmProcess(options(url));
      const ac = new AbortController();
      const pending = warmProcess.turn("run it", { signal: ac.signal });
      pending.catch(() => {});
      try {
        await waitUntil(
          () => treeMembers(warmProcess.treeMarker).some((pid) => cmdline(pid) === "sleep 47"),
          20_000,
          "the slow Bash tool",
        );
      } finally {
        ac.abort();
      }
      const err = await pending.then(
        () => assert.fail("expected the turn to fail"),
        (e: unknown) => e,
      );
      assert.ok(err instanceof ClaudeCodeCliError);
      assert.equal(err.kind, "aborted");
      assert.equal(warmProcess.alive, false);
      assert.equal(warmProcess.dead?.reason, "aborted");
      assert.deepEqual(treeMembers(warmProcess.treeMarker), [], "no process of the tree is left");
      const again = await warmProcess.turn("more").then(
        () => assert.fail("a dead process takes no turn"),
        (e: unknown) => e,
      );
      assert.ok(again instanceof ClaudeCodeCliError);
    },
  );
});

test("a CLI killed between turns is reported dead, and the pool answers `dead`", async () => {
  await withServer([{ text: "first" }], async (url) => {
    const runOptions = options(url);
    const warmProcess = startWarmProcess(runOptions);
    const pool = new WarmPool({ idleTtlMs: 60_000, maxProcesses: 4 });
    await turn(warmProcess, "hi");
    pool.put("s-dead", warmProcess);
    process.kill(warmProcess.pid!, "SIGKILL");
    await waitUntil(() => !warmProcess.alive, 5000, "the handle to see the exit");
    assert.equal(warmProcess.dead?.reason, "exited");
    assert.equal(warmProcess.dead?.signal, "SIGKILL");
    assert.deepEqual(pool.take("s-dead", warmFingerprint(runOptions)), { process: undefined, reason: "dead" });
    await warmProcess.close();
    assert.deepEqual(treeMembers(warmProcess.treeMarker), []);
  });
});

test("pool: fingerprint, least recently used over the cap, idle expiry, closeAll", async () => {
  await withServer([], async (url) => {
    const base = options(url);
    const [warmA, warmB, warmC, warmD] = [0, 1, 2, 3].map(() => startWarmProcess(base));
    const all = [warmA!, warmB!, warmC!, warmD!];
    const fp = warmFingerprint(base);
    assert.ok(
      all.every((p) => p.fingerprint === fp),
      "same options, same fingerprint",
    );
    assert.notEqual(warmFingerprint({ ...base, model: "other" }), fp);
    assert.notEqual(warmFingerprint({ ...base, env: { ...base.env, EXTRA: "1" } }), fp);
    const pool = new WarmPool({ idleTtlMs: 60_000, maxProcesses: 2 });
    try {
      pool.put("a", warmA!);
      pool.put("b", warmB!);
      assert.equal(pool.take("a", fp).process, warmA, "a live matching process is handed out");
      pool.put("a", warmA!); // warmA is now the most recently used
      pool.put("c", warmC!);
      await waitUntil(
        () => !alive(warmB!.pid!) && treeMembers(warmB!.treeMarker).length === 0,
        10_000,
        "the least recently used tree to end",
      );
      assert.equal(pool.take("b", fp).reason, "evicted");
      assert.equal(pool.take("c", "another-fingerprint").reason, "fingerprint_changed");
      await waitUntil(() => treeMembers(warmC!.treeMarker).length === 0, 10_000, "the mismatched tree to end");

      const short = new WarmPool({ idleTtlMs: 300, maxProcesses: 2 });
      short.put("d", warmD!);
      await waitUntil(() => treeMembers(warmD!.treeMarker).length === 0, 10_000, "the idle tree to expire");
      assert.equal(short.take("d", fp).reason, "expired");

      assert.equal(pool.size, 1);
      await pool.closeAll();
      assert.equal(pool.size, 0);
      assert.deepEqual(treeMembers(warmA!.treeMarker), [], "closeAll ends every tree");
      assert.equal(warmA!.alive, false);
    } finally {
      await Promise.all(all.map((p) => p.close()));
    }
    for (const warmProcess of all) assert.deepEqual(treeMembers(warmProcess.treeMarker), []);
  });
});

test("pool: over its memory cap, the least recently used idle tree ends first", async () => {
  await withServer([{ text: "ok" }, { text: "ok" }], async (url) => {
    const base = options(url);
    const [older, newer] = [startWarmProcess(base), startWarmProcess(base)];
    try {
      // After a turn each process holds what it keeps between turns, so its size is steady enough to set a cap from.
      for (const warmProcess of [older, newer])
        assert.equal((await turn(warmProcess, "hello")).outcome.resultText, "ok");
      const biggest = Math.max(older.rssBytes(), newer.rssBytes());
      assert.ok(biggest > 10 * 1024 * 1024, `a CLI tree's resident memory is read from /proc (${biggest} bytes)`);
      // Room for one tree, not two.
      const pool = new WarmPool({ idleTtlMs: 60_000, maxProcesses: 8, maxRssBytes: Math.floor(biggest * 1.5) });
      pool.put("older", older);
      pool.put("newer", newer);
      await waitUntil(() => treeMembers(older.treeMarker).length === 0, 10_000, "the least recently used tree to end");
      assert.equal(pool.take("older", newer.fingerprint).reason, "evicted");
      assert.equal(pool.size, 1);
      assert.equal(newer.alive, true, "the most recently used tree stays");
      await pool.closeAll();
    } finally {
      await Promise.all([older.close(), newer.close()]);
    }
    assert.deepEqual(treeMembers(newer.treeMarker), []);
  });
});
