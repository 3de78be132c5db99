// ATIF trajectories of the recorded fixture logs (real CLI lines in worker envelopes): every one keeps
// to the RFC (./_atif-rfc.ts), subagents are embedded and referenced, abandoned attempts stay out, and
// each agent step is one model response with that response's prompt-side usage.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Envelope } from "../../src/log/index.ts";
import { AtifFacts, fold, initialState, toAtif, type AtifTrajectory } from "../../src/projector/index.ts";
import { checkAtif } from "./_atif-rfc.ts";
import { fixtureLog, fixtureLogNames } from "./_support.ts";

function trajectoryOf(envs: readonly Envelope[]): AtifTrajectory {
  const facts = new AtifFacts();
  const state = initialState();
  for (const env of envs) {
    fold([env], state);
    facts.onEvent(env);
  }
  // Through JSON, as the file is read.
  return JSON.parse(JSON.stringify(toAtif(state, facts, { runnerVersion: "test" }))) as AtifTrajectory;
}

type Obj = Record<string, unknown>;
const linesOf = (envs: readonly Envelope[]): Obj[] =>
  envs.filter((e) => e.kind === "cli.line").map((e) => JSON.parse((e.data as { raw: string }).raw) as Obj);

test("every fixture log's trajectory keeps to ATIF v1.7", () => {
  for (const name of fixtureLogNames()) {
    const trajectory = trajectoryOf(fixtureLog(name));
    assert.ok(checkAtif(trajectory, name) > 0, `${name} has steps`);
  }
});

test("a subagent's work is an embedded trajectory the starting call's observation refers to", () => {
  const envs = fixtureLog("background-subagent");
  const trajectory = trajectoryOf(envs);
  const subs = trajectory.subagent_trajectories ?? [];
  assert.equal(subs.length, 1);
  const callStep = trajectory.steps.find((s) => s.tool_calls?.some((c) => c.function_name === "Agent"));
  assert.ok(callStep !== undefined);
  const call = callStep.tool_calls![0]!;
  const result = callStep.observation!.results.find((r) => r.source_call_id === call.tool_call_id)!;
  assert.deepEqual(
    result.subagent_trajectory_ref?.map((r) => r.trajectory_id),
    [subs[0]!.trajectory_id],
  );
  // Its task (the call's prompt) is the subagent's user message; its response comes after.
  assert.equal(subs[0]!.steps[0]!.source, "user");
  assert.equal(subs[0]!.steps[0]!.message, (call.arguments as { prompt: string }).prompt);
  const subTexts = linesOf(envs)
    .filter((l) => l["type"] === "assistant" && typeof l["parent_tool_use_id"] === "string")
    .flatMap((l) => ((l["message"] as Obj)["content"] as Obj[]).map((b) => b["text"]));
  assert.deepEqual(
    subs[0]!.steps.filter((s) => s.source === "agent").map((s) => s.message),
    subTexts,
  );
  for (const text of subTexts) assert.ok(!trajectory.steps.some((s) => s.message === text), "not at top level");
});

test("abandoned attempts stay out; the conversation's responses are agent steps with their usage", () => {
  const envs = fixtureLog("crash-retry");
  const trajectory = trajectoryOf(envs);
  const turns = trajectory.extra!["turns"] as Array<{ attempts: number; attempts_written: number }>;
  assert.deepEqual(
    turns.map((t) => [t.attempts, t.attempts_written]),
    [
      [2, 1],
      [2, 1],
    ],
  );
  // Which responses count: those of the attempts turn.finished names.
  const accepted = new Map<string, number>();
  for (const env of envs)
    if (env.kind === "turn.finished") accepted.set(env.turn, (env.data as { attempt: number }).attempt);
  const responses = new Map<string, Obj>();
  for (const env of envs) {
    if (env.kind !== "cli.line" || accepted.get(env.turn) !== env.attempt) continue;
    const line = JSON.parse((env.data as { raw: string }).raw) as Obj;
    if (line["type"] !== "assistant" || line["parent_tool_use_id"] != null) continue;
    const message = line["message"] as Obj;
    responses.set(message["id"] as string, message["usage"] as Obj);
  }
  const agentSteps = trajectory.steps.filter((s) => s.source === "agent");
  assert.equal(agentSteps.length, responses.size, "one agent step per response");
  for (const [step, usage] of agentSteps.map((s, i) => [s, [...responses.values()][i]!] as const)) {
    const input = (usage["input_tokens"] as number) + (usage["cache_read_input_tokens"] as number);
    assert.equal(step.metrics?.prompt_tokens, input + (usage["cache_creation_input_tokens"] as number));
    assert.equal(step.metrics?.cached_tokens, usage["cache_read_input_tokens"]);
    assert.equal(step.llm_call_count, 1);
  }
  const prompts = envs.filter((e) => e.kind === "turn.queued").map((e) => (e.data as { prompt: string }).prompt);
  assert.deepEqual(
    trajectory.steps.filter((s) => s.source === "user").map((s) => s.message),
    prompts,
  );
});
