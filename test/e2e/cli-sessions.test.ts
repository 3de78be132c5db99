// Thread sessions, session files moving between config dirs, and per-run config homes, on the real CLI.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  captureSessionFile,
  InMemorySessionStore,
  LostSessionError,
  restoreSessionFile,
  runThreadTurn,
  runTurn,
} from "../../src/runner/index.ts";
import { startScriptedServer } from "../runner/_model.ts";
import { hermeticEnv } from "../runner/_support.ts";

const dir = (p: string): string => mkdtempSync(join(tmpdir(), p));

test("thread turns: first fresh, then resumed (model sees history), cwd change → fresh, lost session → error or fresh", async () => {
  const server = await startScriptedServer([
    { text: "one" },
    { text: "two" },
    { text: "three" },
    { text: "four" },
    { text: "five" },
  ]);
  try {
    const store = new InMemorySessionStore();
    const env = hermeticEnv(server.url);
    const cwd = dir("ts-thread-");
    const t1 = await runThreadTurn({ store, threadId: "th", cwd, prompt: "first-question-marker", env }).outcome;
    assert.equal(t1.resumed, false);
    assert.equal(t1.freshReason, "new_thread");
    assert.equal((await store.get("th"))?.sessionId, t1.sessionId);

    const h2 = runThreadTurn({ store, threadId: "th", cwd, prompt: "second", env });
    const lines2: string[] = [];
    for await (const parsed of h2.lines) lines2.push(parsed.type);
    const t2 = await h2.outcome;
    assert.ok(lines2.includes("result/success"));
    assert.equal(t2.resumed, true);
    assert.equal(t2.sessionId, t1.sessionId);
    assert.ok(JSON.stringify(server.requests()[1]!["messages"]).includes("first-question-marker"));

    const t3 = await runThreadTurn({ store, threadId: "th", cwd: dir("ts-thread-other-"), prompt: "third", env })
      .outcome;
    assert.equal(t3.resumed, false);
    assert.equal(t3.freshReason, "cwd_changed");
    assert.equal(t3.abandonedSessionId, t1.sessionId);
    assert.notEqual(t3.sessionId, t1.sessionId);

    // The store points at a session the CLI does not have.
    const bogus = "0b7e0f3a-1111-4222-8333-444455556666";
    await store.set("lost", { sessionId: bogus, cwd, updatedAt: 0 });
    const err = await runThreadTurn({ store, threadId: "lost", cwd, prompt: "x", env }).outcome.then(
      () => assert.fail("expected"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof LostSessionError);
    assert.equal(err.threadId, "lost");
    assert.equal((await store.get("lost"))?.sessionId, bogus, "nothing stored after a failed turn");
    const fresh = await runThreadTurn({ store, threadId: "lost", cwd, prompt: "x", env, onLostSession: "fresh" })
      .outcome;
    assert.equal(fresh.freshReason, "lost_session");
    assert.equal(fresh.abandonedSessionId, bogus);
    assert.equal((await store.get("lost"))?.sessionId, fresh.sessionId);
  } finally {
    await server.close();
  }
});

test("session file captured in config dir A, restored into fresh dir B: turn 2 resumes from B with the history", async () => {
  const server = await startScriptedServer([{ text: "noted" }, { text: "it was 42" }]);
  try {
    const cwd = dir("ts-move-");
    const homeA = dir("ts-cfg-a-");
    const homeB = dir("ts-cfg-b-");
    const t1 = await runTurn({ cwd, prompt: "remember the number 42-marker", env: hermeticEnv(server.url, homeA) })
      .outcome;
    const bytes = captureSessionFile(join(homeA, "config"), cwd, t1.sessionId!);
    assert.ok(bytes !== undefined && bytes.length > 0, "the CLI wrote its session file where we expect");
    restoreSessionFile(join(homeB, "config"), cwd, t1.sessionId!, bytes);
    const t2 = await runTurn({
      cwd,
      prompt: "which number?",
      resume: t1.sessionId!,
      env: hermeticEnv(server.url, homeB),
    }).outcome;
    assert.equal(t2.sessionId, t1.sessionId);
    assert.ok(JSON.stringify(server.requests()[1]!["messages"]).includes("42-marker"));
  } finally {
    await server.close();
  }
});

test("per-run config home with env auth: empty home, outcome says so, session file captured, home removed; threads carry it across homes", async () => {
  const server = await startScriptedServer([{ text: "a" }, { text: "b" }]);
  try {
    const root = dir("ts-inst-");
    const operator = dir("ts-operator-"); // no credential there
    const {
      CLAUDE_CONFIG_DIR: _c,
      TMPDIR: _t,
      CLAUDE_CODE_TMPDIR: _ct,
      XDG_RUNTIME_DIR: _x,
      ...env
    } = hermeticEnv(server.url);
    const store = new InMemorySessionStore();
    const cwd = dir("ts-home-cwd-");
    const configHome = { instanceId: "test-inst", instanceRoot: root, operatorConfigDir: operator };
    const h1 = runThreadTurn({ store, threadId: "t", cwd, prompt: "home-marker", env, configHome });
    const home1 = await new Promise<string>((r) => setImmediate(() => r(h1.current!.configHome!.dir)));
    const o1 = await h1.outcome;
    assert.equal(o1.auth, "env");
    assert.ok(o1.sessionFile !== undefined && o1.sessionFile.length > 0);
    assert.equal(existsSync(home1), false, "home removed after the run");
    const o2 = await runThreadTurn({ store, threadId: "t", cwd, prompt: "again", env, configHome }).outcome;
    assert.equal(o2.resumed, true);
    assert.ok(JSON.stringify(server.requests()[1]!["messages"]).includes("home-marker"));
    assert.deepEqual(readdirSync(join(root, "instances", "test-inst", "config-homes")), []);
    assert.deepEqual(readdirSync(join(root, "instances", "test-inst", "live")), []);
  } finally {
    await server.close();
  }
});

test("per-run config home refuses before spawning when there is no credential and no env auth", async () => {
  const server = await startScriptedServer([{ text: "never" }]);
  try {
    const { ANTHROPIC_API_KEY: _k, ...env } = hermeticEnv(server.url);
    assert.throws(
      () =>
        runTurn({
          cwd: dir("ts-noauth-"),
          prompt: "x",
          env: { ...env, ANTHROPIC_API_KEY: undefined },
          isolate: true,
          configHome: { instanceId: "na", instanceRoot: dir("ts-inst-"), operatorConfigDir: dir("ts-op-") },
        }),
      /claude auth login/,
    );
    assert.equal(server.requests().length, 0);
  } finally {
    await server.close();
  }
});
