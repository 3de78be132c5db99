// A bad cwd is the caller's mistake, not the fleet's: a relative cwd is refused at enqueue, a missing
// one or a file (and with checkCwd, at enqueue on a host that shares the workers' files); a worker
// given such a job fails the turn with `bad_cwd` before any CLI starts, does not retry it, and
// `turnstream run --wait` exits 2 naming the path.
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createProducer, InvalidTurnError } from "../../src/queue/index.ts";
import { exitCodeOf, outcomeOfErrorKind } from "../../src/bin/exit-codes.ts";
import { isRetryableKind } from "../../src/events/index.ts";
import { onlyJson, turnstream } from "../bin/_cli.ts";
import { dataOf, kindsOf, rig } from "./_more.ts";

test("bad_cwd is a usage outcome (exit 2) and never retried", () => {
  assert.equal(outcomeOfErrorKind("bad_cwd"), "usage");
  assert.equal(exitCodeOf(outcomeOfErrorKind("bad_cwd")), 2);
  assert.equal(isRetryableKind("bad_cwd"), false);
});

test("enqueue refuses a relative cwd always, and with checkCwd one that is missing or a file here, naming it", async () => {
  const stage = await rig({ responses: [] });
  const checking = createProducer({
    redis: stage.redis,
    logPrefix: stage.space.logPrefix,
    queuePrefix: stage.space.queuePrefix,
    checkCwd: true,
  });
  try {
    for (const cwd of ["relative/dir", "./ws", "../ws", "ws"]) {
      const err = await stage.producer.enqueueTurn({ prompt: "x", cwd }).then(
        () => assert.fail(`enqueued ${cwd}`),
        (e: unknown) => e,
      );
      assert.ok(err instanceof InvalidTurnError, String(err));
      assert.equal(err.field, "cwd");
      assert.match(err.message, /absolute path/);
    }
    const file = join(stage.ws, "a-file.txt");
    writeFileSync(file, "not a directory\n");
    const cases: [string, RegExp][] = [
      [join(stage.ws, "missing-dir"), /does not exist on this host/],
      [file, /is not a directory on this host/],
      [join(file, "below"), /is not a directory \(a part of the path is a file\)/],
    ];
    for (const [cwd, why] of cases) {
      const err = await checking.enqueueTurn({ prompt: "x", cwd }).then(
        () => assert.fail(`enqueued ${cwd}`),
        (e: unknown) => e,
      );
      assert.ok(err instanceof InvalidTurnError, String(err));
      assert.equal(err.field, "cwd");
      assert.ok(err.message.includes(JSON.stringify(cwd)), err.message);
      assert.match(err.message, why);
    }
    // Without checkCwd the producer cannot know the workers' files: the missing dir is queued.
    const queued = await stage.producer.enqueueTurn({ prompt: "x", cwd: join(stage.ws, "missing-dir") });
    assert.ok(queued.created);
    const ok = await checking.enqueueTurn({ prompt: "x", cwd: stage.ws });
    assert.ok(ok.created, "an existing directory passes the check");
  } finally {
    await checking.close();
    await stage.dispose();
  }
});

test("a worker given a missing cwd or a file as cwd fails the turn with bad_cwd before any CLI starts, without retry", async () => {
  const stage = await rig({ responses: [] });
  try {
    stage.worker();
    const file = join(stage.ws, "plain-file");
    writeFileSync(file, "x");
    // A path is the producer's text: the message quotes it, so a newline in it cannot forge a line.
    for (const cwd of [join(stage.ws, "gone", "deeper"), file, join(stage.ws, "evil\nturn.finished ok")]) {
      const queued = await stage.producer.enqueueTurn({ prompt: "never runs", cwd });
      const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 30_000 });
      assert.equal(res.status, "failed");
      assert.equal(res.errorKind, "bad_cwd");
      assert.ok(res.error?.includes(JSON.stringify(cwd)), res.error);
      assert.ok(!res.error!.includes("\n"), "no raw newline in the message");
      const events = await stage.events(queued.session, queued.turn);
      assert.deepEqual(kindsOf(events), ["turn.queued", "turn.failed"], "no CLI started, no retry");
      const failed = dataOf(events.at(-1)!);
      assert.equal(failed["retryable"], false);
      assert.equal(failed["attempt"], 1);
      assert.equal((failed["error"] as { name: string }).name, "BadCwdError");
    }
    assert.equal(stage.server.requests().length, 0, "the model was never asked");
  } finally {
    await stage.dispose();
  }
});

test("a cwd outside the workspace roots is workspace_not_allowed whether or not it exists: the kind tells nothing of other paths", async () => {
  const stage = await rig({ responses: [] });
  try {
    stage.worker();
    for (const cwd of ["/", "/no-such-dir-turnstream-test"]) {
      const queued = await stage.producer.enqueueTurn({ prompt: "never runs", cwd });
      const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 30_000 });
      assert.equal(res.errorKind, "workspace_not_allowed", cwd);
    }
  } finally {
    await stage.dispose();
  }
});

test("run --wait exits 2 and names the path when the worker refuses the cwd; --check-cwd refuses it before enqueueing", async () => {
  const stage = await rig({ responses: [] });
  try {
    stage.worker();
    const env = { TURNSTREAM_PREFIX: stage.space.logPrefix, TURNSTREAM_QUEUE_PREFIX: stage.space.queuePrefix };
    const missing = join(stage.ws, "not-made-yet");
    const waited = await turnstream(["run", "--wait", "--cwd", missing, "--", "hello"], env);
    assert.equal(waited.code, 2, waited.stdout + waited.stderr);
    assert.match(waited.stderr, /failed \(bad_cwd\): usage/);
    assert.ok(waited.stderr.includes(JSON.stringify(missing)), waited.stderr);
    const json = onlyJson((await turnstream(["run", "--wait", "--json", "--cwd", missing, "--", "hello"], env)).stdout);
    assert.deepEqual(
      [json["status"], json["errorKind"], json["outcome"], json["exitCode"]],
      ["failed", "bad_cwd", "usage", 2],
    );
    assert.ok(String(json["error"]).includes(missing));

    const checked = await turnstream(["run", "--check-cwd", "--cwd", missing, "--", "hello"], env);
    assert.equal(checked.code, 2, checked.stdout + checked.stderr);
    assert.ok(checked.stderr.includes(`${JSON.stringify(missing)} does not exist on this host`), checked.stderr);
    assert.equal(checked.stdout, "", "nothing was queued");
  } finally {
    await stage.dispose();
  }
});
