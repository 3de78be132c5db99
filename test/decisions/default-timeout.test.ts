// The 300 s default of a supervised decision, without waiting 300 s: a hub started without a
// timeout (as the worker starts it) records each request with timeoutMs 300000 and an expiry 300 s
// after the request, the pending index says the same, and the forwarder and the CLI's hook timeout
// are derived from it (305 s, 335 s). Checked on a request the forwarder sends as the hook does, and
// on a real supervised turn through the worker. The numbers are literal on purpose: changing the
// default must fail here.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  decide,
  DEFAULT_DECISION_TIMEOUT_MS,
  FORWARDER_PATH,
  listPending,
  type PendingRequest,
} from "../../src/decisions/index.ts";
import type { Envelope } from "../../src/log/index.ts";
import { nextEvent, OPERATOR, operatorKey, prepare, waitFor, withHub, withCtx } from "./_support.ts";
import { rig } from "../worker/_more.ts";

const DEFAULT_MS = 300_000;

/** expiresAt - at of a decision.requested event: the request's own deadline, from when it was recorded. */
function deadlineAfterRecord(ev: Envelope): number {
  const data = ev.data as { expiresAt: string };
  return Date.parse(data.expiresAt) - Date.parse(ev.at);
}

function assertDefaultDeadline(ev: Envelope): void {
  const data = ev.data as { timeoutMs: number; expiresAt: string };
  assert.equal(data.timeoutMs, DEFAULT_MS, "the request records the 300 s default");
  // expiresAt is `now + timeoutMs`, taken just before the event was stamped: at most 300 s after
  // `at`, and only by the few ms between the two.
  const deadlineMs = deadlineAfterRecord(ev);
  assert.ok(
    deadlineMs <= DEFAULT_MS && deadlineMs > DEFAULT_MS - 5000,
    `expiresAt is ${deadlineMs} ms after the request's at (want ~${DEFAULT_MS})`,
  );
}

function assertDefaultPending(pending: PendingRequest): void {
  assert.equal(
    Date.parse(pending.expiresAt) - Date.parse(pending.requestedAt),
    DEFAULT_MS,
    "the pending index expires the request 300 s after it",
  );
}

test("a hub started without timeoutMs (or with it undefined) waits 300 s: exported default, hub, forwarder and hook timeouts", async () => {
  assert.equal(DEFAULT_DECISION_TIMEOUT_MS, DEFAULT_MS);
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    assert.equal(hub.timeoutMs, DEFAULT_MS);
    const run = prepare(ctx, hub);
    assert.equal(
      JSON.parse(readFileSync(run.runFile, "utf8")).timeoutMs,
      DEFAULT_MS + 5000,
      "the forwarder gives up 5 s after the hub",
    );
    assert.equal(run.hookTimeoutSec, 335, "the CLI's hook timeout is 30 s more");
    assert.equal(JSON.parse(readFileSync(run.settingsFile, "utf8")).hooks.PreToolUse[0].hooks[0].timeout, 335);
    run.close();
  });
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx, { timeoutMs: undefined });
    assert.equal(hub.timeoutMs, DEFAULT_MS, "an explicit undefined (an unset config value) is the default too");
  });
});

test("a request through the forwarder to a hub without timeoutMs: decision.requested expires 300 s after it, as does its pending entry", async () => {
  await withCtx(async (ctx) => {
    const hub = await withHub(ctx);
    const run = prepare(ctx, hub);
    const child = spawn(process.execPath, [FORWARDER_PATH, run.runFile], { stdio: ["pipe", "pipe", "ignore"] });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
    const closed = new Promise<void>((r) => child.on("close", () => r()));
    child.stdin.end(
      JSON.stringify({
        session_id: "cli-1",
        hook_event_name: "PreToolUse",
        tool_name: "Bash",
        tool_input: { command: "ls" },
        tool_use_id: "toolu_default",
        cwd: ctx.dir,
      }),
    );
    const ev = await nextEvent(ctx, "decision.requested", 1, 20_000);
    const pending = await waitFor(async () =>
      (await listPending({ redis: ctx.redis, prefix: ctx.prefix })).find((p) => p.session === ctx.session),
    );
    await waitFor(async () => (hub.waiting() === 1 ? true : undefined), 5000);
    // Closing the hub denies what still waits: the forwarder gets its answer now, not in 300 s.
    await hub.close();
    await closed;
    run.close();
    assertDefaultDeadline(ev);
    assertDefaultPending(pending);
    assert.match(out, /"permissionDecision":"deny"/);
  });
});

test("a supervised turn through a worker that does not park (no timeout configured anywhere): the real CLI's request expires 300 s after it", async () => {
  const stage = await rig((ws: string) => ({
    responses: [
      {
        content: [
          { type: "tool_use", name: "Bash", input: { command: `touch ${join(ws, "x.txt")}`, description: "touch" } },
        ],
      },
      { content: [{ type: "text", text: "refused" }] },
    ],
  }));
  stage.worker({ operatorKeys: [OPERATOR.publicKey], parking: { enabled: false } });
  try {
    const enqueued = await stage.producer.enqueueTurn({
      prompt: "touch it",
      cwd: stage.ws,
      options: { supervised: true },
    });
    const pending = await waitFor(
      async () =>
        (await listPending({ redis: stage.redis, prefix: stage.space.logPrefix })).find(
          (p) => p.session === enqueued.session && p.status === "pending",
        ),
      60_000,
    );
    const requested = (await stage.events(enqueued.session)).find((e) => e.kind === "decision.requested");
    // Decided before the checks, so a failing check does not leave the turn waiting on its request.
    await decide(
      { log: stage.producer.log, redis: stage.redis, operatorKey },
      {
        session: enqueued.session,
        requestId: pending.requestId,
        decision: "deny",
        by: "test",
        reason: "checked the deadline",
      },
    );
    assert.equal((await stage.producer.waitForTurn(enqueued.turn, { timeoutMs: 60_000 })).status, "finished");
    assertDefaultPending(pending);
    assert.ok(requested !== undefined);
    assertDefaultDeadline(requested);
  } finally {
    await stage.dispose();
  }
});
