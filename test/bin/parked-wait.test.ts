// `run --wait` and `batch` with --exit-on-park when a followed supervised turn parks, against a real
// worker: the command exits 5 at once, its JSON saying "parked" with the request and the decide
// command, and a batch's JUnit report marks the parked turn skipped with that message. The batch's
// ordering of outcomes with parked turns is checked on its own. (How `run --wait` follows a parked turn
// until it is decided: parked-commands.test.ts.) The tests run side by side, each turn in a session of
// its own.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { junitXml } from "../../src/bin/reports/junit.ts";
import { LiveProgress, TurnProgress } from "../../src/bin/reports/progress.ts";
import { batchReport, worstOutcome, type BatchTurnResult } from "../../src/bin/reports/turn-result.ts";
import { listPending } from "../../src/decisions/index.ts";
import { rig, type Rig } from "../worker/_more.ts";
import { appendCall, PARKING_WORKER } from "../worker/_parked.ts";
import { onlyJson, turnstream } from "./_cli.ts";

let stage: Rig;
let env: Record<string, string>;

describe("--exit-on-park", { concurrency: true }, () => {
  before(async () => {
    stage = await rig((ws: string) => ({
      responses: [appendCall("EXIT-ON", join(ws, "exit.txt")), appendCall("BATCH-PARK", join(ws, "batch.txt"))],
    }));
    // The tests' turns run at once: the run's, and the batch's two.
    stage.worker({ ...PARKING_WORKER, concurrency: 3 });
    env = { TURNSTREAM_PREFIX: stage.space.logPrefix, TURNSTREAM_QUEUE_PREFIX: stage.space.queuePrefix };
  });

  after(() => stage?.dispose());

  test("run --wait --exit-on-park --json: exits 5 at once with status parked, the request and the decide command", async () => {
    const refused = await turnstream(["run", "--exit-on-park", "--json", "--", "never queued"], env);
    assert.equal(refused.code, 2);
    assert.match(String(onlyJson(refused.stdout)["error"]), /--exit-on-park only applies with --wait/);

    const run = await turnstream(
      ["run", "--wait", "--exit-on-park", "--json", "--supervised", "--cwd", stage.ws, "--", "EXIT-ON: append"],
      env,
      120_000,
    );
    assert.equal(run.code, 5, run.stderr);
    const said = onlyJson(run.stdout);
    const session = String(said["session"]);
    const parked = (await listPending({ redis: stage.redis, prefix: stage.space.logPrefix })).find(
      (p) => p.session === session,
    );
    assert.equal(parked?.status, "parked", "the turn is parked, not ended");
    assert.deepEqual(
      { ...said, shown: undefined },
      {
        session,
        turn: parked.turn,
        status: "parked",
        requestId: parked.requestId,
        tool: "Bash",
        shown: undefined,
        deadline: parked.expiresAt,
        decideCommand: `turnstream decide ${session} ${parked.requestId} allow|deny`,
        outcome: "parked",
        exitCode: 5,
      },
    );
    assert.match(String(said["shown"]), /^echo ran >> .*exit\.txt$/);
    assert.match(run.stderr, /not waiting for it \(--exit-on-park\)/);
  });

  test("batch --exit-on-park: the parked turn is a skipped JUnit testcase saying how to decide it; exit 5 when no turn failed", async () => {
    const file = join(stage.space.root, "parks.jsonl");
    const junit = join(stage.space.root, "parks.xml");
    writeFileSync(
      file,
      [
        JSON.stringify({ prompt: "BATCH-PARK: append", cwd: stage.ws, options: { supervised: true }, label: "parks" }),
        JSON.stringify({ prompt: "just answer", cwd: stage.ws, label: "answers" }),
      ].join("\n"),
    );
    const run = await turnstream(["batch", file, "--exit-on-park", "--json", "--junit", junit], env, 120_000);
    assert.equal(run.code, 5, run.stderr + run.stdout);
    const said = onlyJson(run.stdout) as {
      outcome: string;
      exitCode: number;
      turns: Array<{
        label: string;
        status: string;
        outcome: string;
        session: string;
        requestId?: string;
        decideCommand?: string;
      }>;
    };
    assert.equal(said.outcome, "parked");
    const [parks, answers] = said.turns;
    assert.deepEqual([parks!.status, parks!.outcome, answers!.status], ["parked", "parked", "finished"]);
    assert.equal(parks!.decideCommand, `turnstream decide ${parks!.session} ${parks!.requestId} allow|deny`);
    assert.match(run.stderr, /^turnstream batch: parks: turn \S+ parked: its Bash call waits/m);

    const xml = readFileSync(junit, "utf8");
    assert.match(xml, /<testsuites [^>]*tests="2" failures="0" errors="0" skipped="1"/);
    const skipped = /<testcase name="parks"[\s\S]*?<skipped message="([^"]*)"\/>/
      .exec(xml)?.[1]
      ?.replaceAll("&apos;", "'");
    assert.match(
      String(skipped),
      new RegExp(
        `^parked: its Bash call \\(request ${parks!.requestId}\\) waits for an operator's decision until \\S+ \\([78]h\\d\\dm left\\); decide it with: turnstream decide ${parks!.session} ${parks!.requestId} allow\\|deny$`,
      ),
    );
    assert.doesNotMatch(/<testcase name="answers"[\s\S]*?<\/testcase>/.exec(xml)![0], /skipped|failure|error/);
  });

  test("on a terminal, a parked notice takes the live lines' place and they are drawn again below it", () => {
    const turns = [new TurnProgress("first"), new TurnProgress("second")];
    const written: string[] = [];
    const live = new LiveProgress(turns, (text) => written.push(text), 80);
    turns[0]!.read({ kind: "turn.parked", attempt: 1, at: new Date().toISOString(), data: {} } as never);
    live.interject(() => written.push("NOTICE\n"));
    live.close();
    const notice = written.indexOf("NOTICE\n");
    assert.equal(written[notice - 1], "\x1b[2A\r\x1b[J", "up over the two lines, cleared below");
    assert.match(written[notice + 1]!, /^\r\x1b\[2Kfirst +parked +attempt 0/, "drawn again below, not over the notice");
    assert.match(written.at(-1)!, /^\x1b\[2A\r\x1b\[2Kfirst/, "then redrawn in place as before");
  });

  test("a batch's outcome with parked turns: parked only when no turn failed, was cancelled or timed out", () => {
    assert.equal(worstOutcome(["finished", "parked"]), "parked");
    assert.equal(worstOutcome(["parked", "timed_out"]), "timed_out");
    assert.equal(worstOutcome(["parked", "cancelled", "finished"]), "cancelled");
    assert.equal(worstOutcome(["task_failed", "parked"]), "task_failed");
    const result = (over: Partial<BatchTurnResult>): BatchTurnResult => ({
      line: 1,
      label: "a turn",
      session: "s-1",
      turn: "t_1",
      status: "finished",
      outcome: "finished",
      attempts: 1,
      toolCalls: 0,
      costUsd: 0,
      tokens: { input: 0, output: 0, cacheRead: 0, cacheCreation: 0 },
      seconds: 1,
      errorKind: undefined,
      message: undefined,
      resultText: undefined,
      ...over,
    });
    const report = batchReport("b.jsonl", new Date(), [
      result({
        status: "parked",
        outcome: "parked",
        message: "parked: decide it",
        decideCommand: "turnstream decide s-1 dr-1 allow|deny",
      }),
      result({ line: 2, status: "failed", outcome: "task_failed", errorKind: "max_turns", message: "no" }),
    ]);
    assert.equal(report.exitCode, 1);
    const xml = junitXml(report);
    assert.match(xml, /<skipped message="parked: decide it"\/>/);
    assert.match(xml, /decide it: turnstream decide s-1 dr-1 allow\|deny/);
  });
});
