// What the ATIF RFC asks of a trajectory file, written down from the RFC itself: "RFC: Agent Trajectory
// Interchange Format (ATIF) Specification", changelog v1.7 (April 2026), RFC 0001 of the Harbor project,
// read at https://github.com/harbor-framework/harbor/blob/main/rfcs/0001-trajectory-format.md (formerly
// laude-institute/harbor, docs/rfcs/0001-trajectory-format.md). Section II (Schema) gives the tables:
// each field's status (Required / Optional / Conditional) below is copied from them. Section VI names the
// reference implementation's checks (Pydantic models that forbid unknown fields, sequential step ids, tool
// call references, ISO 8601 timestamps, agent-only fields), which `checkAtif` makes too.
import assert from "node:assert/strict";

export const ATIF_VERSION = "ATIF-v1.7";

/** Required fields per object of the schema (RFC section II). */
export const REQUIRED = {
  // Root-Level Metadata: schema_version, agent, steps (session_id became Optional in v1.7).
  trajectory: ["schema_version", "agent", "steps"],
  // subagent_trajectories: "trajectory_id is REQUIRED on embedded subagents".
  embeddedTrajectory: ["schema_version", "trajectory_id", "agent", "steps"],
  // AgentSchema: "The name and version fields are required".
  agent: ["name", "version"],
  // StepObject: step_id, source, message ("required but can be an empty string").
  step: ["step_id", "source", "message"],
  // ToolCallSchema.
  toolCall: ["tool_call_id", "function_name", "arguments"],
  // ObservationSchema.
  observation: ["results"],
  // ObservationResultSchema: every field Optional.
  observationResult: [],
  // MetricsSchema and FinalMetricsSchema: every field Optional.
  metrics: [],
  finalMetrics: [],
  // SubagentTrajectoryRefSchema: trajectory_id and trajectory_path are Conditional, at least one set.
  subagentRef: [],
} as const;

/** Every field each table lists (the reference models forbid any other). */
export const FIELDS = {
  trajectory: [
    "schema_version",
    "session_id",
    "trajectory_id",
    "agent",
    "steps",
    "notes",
    "final_metrics",
    "continued_trajectory_ref",
    "extra",
    "subagent_trajectories",
  ],
  agent: ["name", "version", "model_name", "tool_definitions", "extra"],
  step: [
    "step_id",
    "timestamp",
    "source",
    "model_name",
    "reasoning_effort",
    "message",
    "reasoning_content",
    "tool_calls",
    "observation",
    "metrics",
    "extra",
    "llm_call_count",
    "is_copied_context",
  ],
  toolCall: ["tool_call_id", "function_name", "arguments", "extra"],
  observation: ["results"],
  observationResult: ["source_call_id", "content", "subagent_trajectory_ref", "extra"],
  metrics: [
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cost_usd",
    "prompt_token_ids",
    "completion_token_ids",
    "logprobs",
    "extra",
  ],
  finalMetrics: [
    "total_prompt_tokens",
    "total_completion_tokens",
    "total_cached_tokens",
    "total_cost_usd",
    "total_steps",
    "extra",
  ],
  subagentRef: ["trajectory_id", "trajectory_path", "session_id", "extra"],
} as const;

/** StepObject fields "Only applicable when source is agent". */
const AGENT_ONLY = ["model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics"];

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function fields(where: string, value: unknown, required: readonly string[], allowed: readonly string[]): Json {
  assert.ok(isObject(value), `${where} is an object`);
  for (const name of required) assert.ok(name in value && value[name] !== null, `${where}.${name} is required`);
  for (const name of Object.keys(value)) assert.ok(allowed.includes(name), `${where}.${name} is not an ATIF field`);
  return value;
}

const isCount = (value: unknown): boolean => Number.isInteger(value) && (value as number) >= 0;

/** Fails naming the first thing in `doc` the RFC does not allow; returns how many steps it checked. */
export function checkAtif(doc: unknown, where = "trajectory", embedded = false): number {
  const root = fields(where, doc, embedded ? REQUIRED.embeddedTrajectory : REQUIRED.trajectory, FIELDS.trajectory);
  assert.equal(root["schema_version"], ATIF_VERSION, `${where}.schema_version`);
  for (const name of ["session_id", "trajectory_id", "notes"])
    if (name in root) assert.equal(typeof root[name], "string", `${where}.${name} is a string`);
  const agent = fields(`${where}.agent`, root["agent"], REQUIRED.agent, FIELDS.agent);
  assert.equal(typeof agent["name"], "string");
  assert.equal(typeof agent["version"], "string");
  if ("extra" in agent) assert.ok(isObject(agent["extra"]), `${where}.agent.extra is an object`);
  if ("extra" in root) assert.ok(isObject(root["extra"]), `${where}.extra is an object`);
  if ("final_metrics" in root) {
    const final = fields(`${where}.final_metrics`, root["final_metrics"], REQUIRED.finalMetrics, FIELDS.finalMetrics);
    for (const name of ["total_prompt_tokens", "total_completion_tokens", "total_cached_tokens", "total_steps"])
      if (name in final) assert.ok(isCount(final[name]), `${where}.final_metrics.${name} is a count`);
    if ("total_cost_usd" in final) assert.equal(typeof final["total_cost_usd"], "number");
  }

  const embeddedIds = new Set<string>();
  let checked = 0;
  if ("subagent_trajectories" in root) {
    const subs = root["subagent_trajectories"];
    assert.ok(Array.isArray(subs), `${where}.subagent_trajectories is an array`);
    subs.forEach((sub: unknown, index) => {
      checked += checkAtif(sub, `${where}.subagent_trajectories[${index}]`, true);
      const id = (sub as Json)["trajectory_id"] as string;
      assert.ok(!embeddedIds.has(id), `trajectory_id ${id} is unique within subagent_trajectories`);
      embeddedIds.add(id);
    });
  }

  const steps = root["steps"];
  assert.ok(Array.isArray(steps), `${where}.steps is an array`);
  steps.forEach((raw: unknown, index) => {
    const at = `${where}.steps[${index}]`;
    const step = fields(at, raw, REQUIRED.step, FIELDS.step);
    assert.equal(step["step_id"], index + 1, `${at}.step_id: ordinal from 1`);
    assert.ok(["system", "user", "agent"].includes(step["source"] as string), `${at}.source`);
    assert.equal(typeof step["message"], "string", `${at}.message`);
    if ("timestamp" in step) {
      const time = step["timestamp"] as string;
      assert.match(time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/, `${at}.timestamp is ISO 8601`);
      assert.ok(!Number.isNaN(Date.parse(time)), `${at}.timestamp is a time`);
    }
    if (step["source"] !== "agent")
      for (const name of AGENT_ONLY) assert.ok(!(name in step), `${at}.${name} only on agent steps`);
    if ("llm_call_count" in step) assert.ok(isCount(step["llm_call_count"]), `${at}.llm_call_count`);
    if ("extra" in step) assert.ok(isObject(step["extra"]), `${at}.extra is an object`);
    const callIds = new Set<string>();
    if ("tool_calls" in step) {
      assert.ok(Array.isArray(step["tool_calls"]), `${at}.tool_calls is an array`);
      (step["tool_calls"] as unknown[]).forEach((rawCall, callIndex) => {
        const call = fields(`${at}.tool_calls[${callIndex}]`, rawCall, REQUIRED.toolCall, FIELDS.toolCall);
        assert.equal(typeof call["tool_call_id"], "string");
        assert.equal(typeof call["function_name"], "string");
        assert.ok(isObject(call["arguments"]), `${at}.tool_calls[${callIndex}].arguments is an object`);
        assert.ok(!callIds.has(call["tool_call_id"] as string), "tool_call_id unique within the step");
        callIds.add(call["tool_call_id"] as string);
      });
    }
    if ("observation" in step) {
      const observation = fields(`${at}.observation`, step["observation"], REQUIRED.observation, FIELDS.observation);
      assert.ok(Array.isArray(observation["results"]), `${at}.observation.results is an array`);
      (observation["results"] as unknown[]).forEach((rawResult, resultIndex) => {
        const rat = `${at}.observation.results[${resultIndex}]`;
        const result = fields(rat, rawResult, REQUIRED.observationResult, FIELDS.observationResult);
        if ("source_call_id" in result)
          assert.ok(callIds.has(result["source_call_id"] as string), `${rat}.source_call_id names a call of the step`);
        if ("content" in result) assert.equal(typeof result["content"], "string", `${rat}.content`);
        for (const [refIndex, rawRef] of (
          (result["subagent_trajectory_ref"] as unknown[] | undefined) ?? []
        ).entries()) {
          const ref = fields(
            `${rat}.subagent_trajectory_ref[${refIndex}]`,
            rawRef,
            REQUIRED.subagentRef,
            FIELDS.subagentRef,
          );
          assert.ok("trajectory_id" in ref || "trajectory_path" in ref, "a ref sets trajectory_id or trajectory_path");
          if (!("trajectory_path" in ref))
            assert.ok(
              embeddedIds.has(ref["trajectory_id"] as string),
              "an embedded ref resolves in subagent_trajectories",
            );
        }
      });
    }
    if ("metrics" in step) {
      const metrics = fields(`${at}.metrics`, step["metrics"], REQUIRED.metrics, FIELDS.metrics);
      for (const name of ["prompt_tokens", "completion_tokens", "cached_tokens"])
        if (name in metrics) assert.ok(isCount(metrics[name]), `${at}.metrics.${name} is a count`);
      if ("cost_usd" in metrics) assert.equal(typeof metrics["cost_usd"], "number");
    }
    checked++;
  });
  return checked;
}
