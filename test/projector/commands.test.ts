// replay --until at every seq equals the fold of that prefix; the replay, tail, sessions commands
// on a real Redis through the turnstream binary.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  fold,
  parseUntil,
  readModel,
  renderTranscriptText,
  replaySession,
  replayWithSleep,
  startProjector,
  toMessages,
} from "../../src/projector/index.ts";
import {
  appendEnvelopes,
  fixtureLog,
  fixtureLogNames,
  redisCtx,
  rid,
  root,
  viaJson,
  type RedisCtx,
} from "./_support.ts";

const exec = promisify(execFile);
// Made by the suite's before, so a run whose name filter matches none of these tests opens no client.
let ctx: RedisCtx;
const node = join(root, "node_modules", ".bin", "node");
const bin = join(root, "src", "bin", "turnstream.ts");

async function cli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const output = await exec(node, [bin, ...args], {
      cwd: root,
      env: { ...process.env, TURNSTREAM_PREFIX: ctx.prefix, NO_COLOR: "1", ...env },
    });
    return { code: 0, stdout: output.stdout, stderr: output.stderr };
  } catch (err) {
    const failure = err as { code: number; stdout: string; stderr: string };
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr };
  }
}

const sessions: Record<string, string> = {};

describe("replay, tail and sessions commands", () => {
  before(async () => {
    ctx = redisCtx();
    for (const name of fixtureLogNames()) {
      sessions[name] = rid(name.slice(0, 8));
      await appendEnvelopes(ctx.log, sessions[name]!, fixtureLog(name));
    }
  });
  after(() => ctx.cleanup());

  test("replay --until SEQ at every seq of every fixture equals the fold of that prefix", async () => {
    for (const name of fixtureLogNames()) {
      const envs = fixtureLog(name).map((e) => ({ ...e, session: sessions[name]! }));
      for (let seq = 1; seq <= envs.length; seq++) {
        const state = await replaySession(ctx.log, sessions[name]!, { until: { seq } });
        assert.deepEqual(state, fold(envs.slice(0, seq)), `${name} @${seq}`);
      }
    }
  });

  test("replay --until TIME is the state as of that moment; --speed keeps the original gaps scaled", async () => {
    const name = "crash-retry";
    const envs = fixtureLog(name).map((e) => ({ ...e, session: sessions[name]! }));
    const eventCount = 11;
    const state = await replaySession(ctx.log, sessions[name]!, { until: parseUntil(envs[eventCount - 1]!.at) });
    assert.deepEqual(state, fold(envs.slice(0, eventCount)));
    const slept: number[] = [];
    const timed = await replayWithSleep(ctx.log, sessions[name]!, { speed: 4 }, async (ms) => void slept.push(ms));
    assert.deepEqual(timed, fold(envs));
    const gaps = envs
      .slice(1)
      .map((e, i) => (Date.parse(e.at) - Date.parse(envs[i]!.at)) / 4)
      .filter((g) => g > 0);
    assert.deepEqual(slept, gaps);
    const none: number[] = [];
    await replayWithSleep(ctx.log, sessions[name]!, {}, async (ms) => void none.push(ms));
    assert.deepEqual(none, [], "no sleeping unless asked");
    assert.throws(() => parseUntil("yesterday"), /ISO time/);
  });

  test("turnstream replay: text, json, messages; --until at every seq of a fixture; errors", async () => {
    const name = "plain-reply";
    const session = sessions[name]!;
    const envs = fixtureLog(name).map((e) => ({ ...e, session }));
    const full = fold(envs);
    const text = await cli(["replay", session]);
    assert.equal(text.code, 0, text.stderr);
    assert.equal(text.stdout, renderTranscriptText(full) + "\n");
    const msgs = await cli(["replay", session, "--format", "messages"]);
    assert.deepEqual(JSON.parse(msgs.stdout), viaJson(toMessages(full)));
    for (let seq = 1; seq <= envs.length; seq++) {
      const output = await cli(["replay", session, "--until", String(seq), "--format", "json"]);
      assert.equal(output.code, 0, output.stderr);
      assert.deepEqual(JSON.parse(output.stdout), viaJson(fold(envs.slice(0, seq))), `--until ${seq}`);
    }
    const unknown = await cli(["replay", rid("nosuch")]);
    assert.equal(unknown.code, 2, "an unknown session is a usage error");
    assert.match(unknown.stderr, /has no events under key prefix/);
    const bad = await cli(["replay", session, "--format", "xml"]);
    assert.equal(bad.code, 2);
    const noRedis = await cli(["replay", session], { REDIS_URL: "redis://user:hunter2-secret@127.0.0.1:1" });
    assert.equal(noRedis.code, 3, "Redis unreachable is infrastructure");
    assert.match(noRedis.stderr, /cannot reach Redis at redis:\/\/127\.0\.0\.1:1.*start one/);
    assert.ok(!noRedis.stderr.includes("hunter2"), "no credentials in the error");
    // Replay never touches live read models.
    assert.equal(await readModel(ctx.redis, session, { prefix: ctx.prefix }), undefined);
  });

  test("turnstream replay --follow prints live events as they are appended", async () => {
    const session = rid("follow");
    const envs = fixtureLog("plain-reply");
    await appendEnvelopes(ctx.log, session, envs.slice(0, 2));
    const child = spawn(node, [bin, "replay", session, "--follow"], {
      cwd: root,
      env: { ...process.env, TURNSTREAM_PREFIX: ctx.prefix },
    });
    let out = "";
    const seen = (needle: string): Promise<void> =>
      new Promise((resolve) => {
        const check = (): void => {
          if (out.includes(needle)) resolve();
          else child.stdout.once("data", check);
        };
        check();
      });
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    try {
      const prompt = (envs[0]!.data as { prompt: string }).prompt;
      await seen(`User: ${prompt}`);
      await appendEnvelopes(ctx.log, session, envs.slice(2));
      const reply = renderTranscriptText(fold(envs)).split("\n").at(-1)!;
      await seen(reply);
    } finally {
      child.kill("SIGTERM");
    }
    const code = await new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
    assert.equal(code, 0);
  });

  test("turnstream tail: one line per event; --json; --follow sees appends", async () => {
    const name = "denials";
    const session = sessions[name]!;
    const envs = fixtureLog(name);
    const output = await cli(["tail", session]);
    assert.equal(output.code, 0, output.stderr);
    const lines = output.stdout.trimEnd().split("\n");
    assert.equal(lines.length, envs.length);
    lines.forEach((l, i) =>
      assert.match(l, new RegExp(`^\\s*${envs[i]!.seq} \\S+ ${envs[i]!.kind.replace(".", "\\.")}`)),
    );
    assert.ok(!output.stdout.includes("\u001b["), "no colour off a TTY");
    assert.ok(lines.some((l) => l.includes("decision.made") && l.includes("req-1 → deny by user:ops")));
    const json = await cli(["tail", session, "--json"]);
    assert.deepEqual(
      json.stdout
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l).kind),
      envs.map((e) => e.kind),
    );
    const unknown = await cli(["tail", rid("nosuch")]);
    assert.equal(unknown.code, 2, "an unknown session is a usage error");

    const live = rid("tailf");
    const child = spawn(node, [bin, "tail", live, "--follow"], {
      cwd: root,
      env: { ...process.env, TURNSTREAM_PREFIX: ctx.prefix },
    });
    let out = "";
    const waitLines = (count: number): Promise<void> =>
      new Promise((resolve) => {
        const check = (): void => {
          if (out.split("\n").filter((l) => l !== "").length >= count) resolve();
          else child.stdout.once("data", check);
        };
        child.stdout.on("data", (d: Buffer) => (out += d.toString()));
        check();
      });
    const stderrSeen = new Promise<void>((resolve) => child.stderr.once("data", () => resolve()));
    try {
      await stderrSeen; // "waiting for the first" event: the tail is connected
      await appendEnvelopes(ctx.log, live, fixtureLog("plain-reply"));
      await waitLines(fixtureLog("plain-reply").length);
      assert.match(out, /turn\.finished/);
    } finally {
      child.kill("SIGTERM");
    }
  });

  test("turnstream sessions: status, turns, cost, last activity from the live read models", async () => {
    const projector = startProjector({ redis: ctx.redis, prefix: ctx.prefix, rescanMs: 100, blockMs: 200 });
    try {
      await projector.waitIdle(20_000);
    } finally {
      await projector.stop();
    }
    const output = await cli(["sessions", "--json"]);
    assert.equal(output.code, 0, output.stderr);
    const rows = output.stdout
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const name of fixtureLogNames()) {
      const row = rows.find((x) => x["session"] === sessions[name]);
      assert.ok(row, `${name} listed`);
      const state = fold(fixtureLog(name));
      assert.equal(row["status"], state.view.status);
      assert.equal(row["turns"], state.view.turns.length);
      assert.equal(row["costUsd"], state.view.costUsd);
      assert.equal(row["lastActivity"], state.view.lastAt);
      assert.equal(row["pendingDecisions"], state.decisions.pending.length);
    }
    const table = await cli(["sessions"]);
    assert.match(table.stdout, /SESSION\s+STATUS\s+TURNS\s+COST\s+LAST ACTIVITY/);
    assert.match(table.stdout, new RegExp(`${sessions["api-errors"]}\\s+failed \\(auth\\)\\s+2`));
  });
});
