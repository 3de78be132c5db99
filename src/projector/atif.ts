// A session as an ATIF trajectory: the Agent Trajectory Interchange Format of the Harbor project,
// RFC 0001, version 1.7 (https://github.com/harbor-framework/harbor/blob/main/rfcs/0001-trajectory-format.md).
//
// The conversation comes from the read model (the reducer already pairs calls with results, nests
// subagents, and knows which attempts count); what the read model does not keep, AtifFacts collects
// from the same replay: when each event was written and each assistant line's message (id, model,
// usage). Mapping:
// - a turn's prompt, and any user text of its run → a `user` step;
// - one assistant message (one model inference: the lines sharing a message id) → an `agent` step with
//   its text, its tool calls, their results as the observation, and its prompt-side token counts;
// - an API error the CLI reported → a `system` step; a tool result whose call was never seen → a
//   `system` step whose observation has no `source_call_id`;
// - a subagent's work → an embedded trajectory (`subagent_trajectories`), referenced from the
//   observation of the call that started it.
// Only attempts that are part of the conversation are written (every attempt of a turn that was not
// abandoned: a parked run and the run that resumed it); abandoned ones are counted in `extra`.
import { isObj, numberField, objField, stringField, type Obj } from "../kernel/index.ts";
import type { Envelope } from "../log/index.ts";
import { objOf, parseLine } from "../protocol/index.ts";
import { MAX_RESULT_CHARS } from "./reduce.ts";
import type { ReplayObserver } from "./replay.ts";
import { zeroTokens, type ProjectionState, type TranscriptItem, type TurnView } from "./state.ts";

export const ATIF_SCHEMA_VERSION = "ATIF-v1.7";
/** The agent system the trajectories describe: the runs are Claude Code CLI runs. */
export const ATIF_AGENT_NAME = "claude-code";

export interface AtifToolCall {
  tool_call_id: string;
  function_name: string;
  arguments: Obj;
  extra?: Obj;
}

export interface AtifSubagentRef {
  trajectory_id: string;
  session_id?: string;
}

export interface AtifObservationResult {
  source_call_id?: string;
  content?: string;
  subagent_trajectory_ref?: AtifSubagentRef[];
  extra?: Obj;
}

export interface AtifMetrics {
  prompt_tokens?: number;
  completion_tokens?: number;
  cached_tokens?: number;
  cost_usd?: number;
  extra?: Obj;
}

export interface AtifStep {
  step_id: number;
  timestamp?: string;
  source: "system" | "user" | "agent";
  model_name?: string;
  message: string;
  tool_calls?: AtifToolCall[];
  observation?: { results: AtifObservationResult[] };
  metrics?: AtifMetrics;
  llm_call_count?: number;
  extra?: Obj;
}

export interface AtifAgent {
  name: string;
  version: string;
  model_name?: string;
  extra?: Obj;
}

export interface AtifFinalMetrics {
  total_prompt_tokens?: number;
  total_completion_tokens?: number;
  total_cached_tokens?: number;
  total_cost_usd?: number;
  total_steps?: number;
  extra?: Obj;
}

export interface AtifTrajectory {
  schema_version: typeof ATIF_SCHEMA_VERSION;
  session_id?: string;
  trajectory_id?: string;
  agent: AtifAgent;
  steps: AtifStep[];
  notes?: string;
  final_metrics?: AtifFinalMetrics;
  extra?: Obj;
  subagent_trajectories?: AtifTrajectory[];
}

/** An assistant message's token counts, as its lines report them. */
interface MessageUsage {
  input: number;
  cacheRead: number;
  cacheCreation: number;
}

/**
 * What a trajectory needs that the read model does not keep, gathered while the same replay folds the
 * log: the time of each event an item can point at (by seq), and each assistant line's message.
 */
export class AtifFacts implements ReplayObserver {
  /** Epoch milliseconds of each turn.queued and cli.line event, by seq. */
  readonly #at = new Map<number, number>();
  /** Message id and model of each assistant line, by seq. */
  readonly #messages = new Map<number, { id: string | undefined; model: string | undefined }>();
  /** The latest usage each message id reported. */
  readonly #usage = new Map<string, MessageUsage>();

  onEvent(env: Envelope): void {
    if (env.kind !== "cli.line" && env.kind !== "turn.queued") return;
    const ms = Date.parse(env.at);
    if (!Number.isNaN(ms)) this.#at.set(env.seq, ms);
    if (env.kind !== "cli.line" || !isObj(env.data) || typeof env.data["raw"] !== "string") return;
    const line = objOf(parseLine(env.data["raw"]));
    if (line?.["type"] !== "assistant") return;
    const message = objField(line, "message");
    const id = stringField(message, "id");
    const model = stringField(message, "model");
    this.#messages.set(env.seq, { id, model: model === "<synthetic>" ? undefined : model });
    const usage = objField(message, "usage");
    if (id !== undefined && usage !== undefined) {
      this.#usage.set(id, {
        input: numberField(usage, "input_tokens") ?? 0,
        cacheRead: numberField(usage, "cache_read_input_tokens") ?? 0,
        cacheCreation: numberField(usage, "cache_creation_input_tokens") ?? 0,
      });
    }
  }

  /** ISO 8601 time of the event at `seq`, when it had a readable one. */
  timeOf(seq: number | null): string | undefined {
    const ms = seq === null ? undefined : this.#at.get(seq);
    return ms === undefined ? undefined : new Date(ms).toISOString();
  }

  messageOf(seq: number): { id: string | undefined; model: string | undefined } | undefined {
    return this.#messages.get(seq);
  }

  usageOf(messageId: string | undefined): MessageUsage | undefined {
    return messageId === undefined ? undefined : this.#usage.get(messageId);
  }
}

export interface AtifOptions {
  /** The turnstream version that wrote the export (agent.extra). */
  runnerVersion: string;
}

// Why some figures are where they are; readers of the file see it in `notes`.
const NOTES =
  "Written by turnstream from the session's event log. Each agent step is one model response (the CLI's " +
  "assistant lines sharing a message id). Per-step metrics hold the prompt side only (prompt_tokens counts " +
  "cached and cache-creation tokens, cached_tokens the cache reads): the CLI prints an assistant line before " +
  "its response has finished, so its output count is not final there. final_metrics holds the CLI's own " +
  "per-run totals (its result lines) of the attempts written here; subagent responses are in " +
  `subagent_trajectories. Tool results longer than ${MAX_RESULT_CHARS} characters are cut (extra.truncated_chars).`;

/** The session's trajectory, from its folded read model and the facts gathered in the same replay. */
export function toAtif(state: ProjectionState, facts: AtifFacts, options: AtifOptions): AtifTrajectory {
  const view = state.view;
  const agentVersion = view.cliVersion ?? "unknown";
  const steps = new StepList(facts, view.id ?? undefined, agentVersion);
  const totals = { ...zeroTokens(), cost: 0 };
  const turns: Obj[] = [];
  state.transcript.turns.forEach((turn, index) => {
    const turnView = view.turns[index]!;
    const written = turn.attempts.filter((attempt) => !attempt.abandoned);
    if (turn.prompt !== null) steps.user(turn.prompt, turn.promptSeq, { turn: turn.turn });
    for (const attempt of written) steps.items(attempt.items, { turn: turn.turn, attempt: attempt.attempt });
    for (const attempt of turnView.attempts) {
      if (!written.some((w) => w.attempt === attempt.attempt)) continue;
      totals.input += attempt.tokens.input;
      totals.output += attempt.tokens.output;
      totals.cacheRead += attempt.tokens.cacheRead;
      totals.cacheCreation += attempt.tokens.cacheCreation;
      totals.cost += attempt.costUsd;
    }
    turns.push(turnExtra(turnView, written.length));
  });
  const agentExtra: Obj = { runner: "turnstream", runner_version: options.runnerVersion };
  if (view.cliSessionId !== null) agentExtra["cli_session_id"] = view.cliSessionId;
  const agent: AtifAgent = { name: ATIF_AGENT_NAME, version: agentVersion, extra: agentExtra };
  if (view.model !== null) agent.model_name = view.model;
  const trajectory: AtifTrajectory = {
    schema_version: ATIF_SCHEMA_VERSION,
    agent: inOrder(agent, AGENT_ORDER),
    steps: steps.steps,
    notes: NOTES,
  };
  if (view.id !== null) trajectory.session_id = view.id;
  trajectory.final_metrics = {
    total_prompt_tokens: totals.input + totals.cacheRead + totals.cacheCreation,
    total_completion_tokens: totals.output,
    total_cached_tokens: totals.cacheRead,
    total_cost_usd: totals.cost,
    total_steps: steps.steps.length,
    extra: {
      cache_creation_input_tokens: totals.cacheCreation,
      // What the session spent, abandoned attempts included (they were paid for too).
      session_cost_usd: view.costUsd,
    },
  };
  trajectory.extra = view.cwd === null ? { turns } : { turns, cwd: view.cwd };
  if (steps.subagents.length > 0) trajectory.subagent_trajectories = steps.subagents;
  return inOrder(trajectory, TRAJECTORY_ORDER);
}

function turnExtra(turn: TurnView, written: number): Obj {
  const out: Obj = { turn: turn.id, status: turn.status, attempts: turn.attempts.length, attempts_written: written };
  if (turn.errorKind !== null) out["error_kind"] = turn.errorKind;
  if (turn.error !== null && turn.error.message !== null) out["error"] = turn.error.message;
  if (Object.keys(turn.labels).length > 0) out["labels"] = turn.labels;
  return out;
}

type ToolItem = Extract<TranscriptItem, { t: "tool" }>;

/** Steps being built for one trajectory (the session's, or a subagent's), numbered from 1. */
class StepList {
  readonly #steps: AtifStep[] = [];
  readonly subagents: AtifTrajectory[] = [];
  readonly #facts: AtifFacts;
  readonly #session: string | undefined;
  readonly #agentVersion: string;
  /** The agent step the next block of the same message joins (undefined id: a block of its own). */
  #open: { step: AtifStep; messageId: string | undefined; calls: ToolItem[] } | undefined;

  /** The steps, fields in the RFC's order (they are filled in as lines come, in whatever order). */
  get steps(): AtifStep[] {
    return this.#steps.map((step) => inOrder(step, STEP_ORDER));
  }

  constructor(facts: AtifFacts, session: string | undefined, agentVersion: string) {
    this.#facts = facts;
    this.#session = session;
    this.#agentVersion = agentVersion;
  }

  user(text: string, seq: number | null, extra: Obj): void {
    this.#close();
    this.#push({ source: "user", message: text }, seq, extra);
  }

  items(items: readonly TranscriptItem[], extra: Obj): void {
    for (const item of items) {
      switch (item.t) {
        case "user":
          this.user(item.text, item.seq, extra);
          break;
        case "text": {
          const { step } = this.#agent(item.messageId ?? undefined, item.seq, extra);
          step.message = step.message === "" ? item.text : `${step.message}\n${item.text}`;
          break;
        }
        case "tool":
          this.#agent(this.#facts.messageOf(item.seq)?.id, item.seq, extra).calls.push(item);
          break;
        case "api_error":
          this.#close();
          this.#push(
            { source: "system", message: `[API error: ${item.error}]${item.text === "" ? "" : ` ${item.text}`}` },
            item.seq,
            { ...extra, api_error: item.error },
          );
          break;
        case "orphan_result":
          this.#close();
          this.#push(
            {
              source: "system",
              message: "a tool result whose call is not in the log",
              observation: {
                results: [{ content: item.result.text, extra: resultExtra(item.result, item.toolUseId) }],
              },
            },
            item.result.seq,
            extra,
          );
          break;
      }
    }
    this.#close();
  }

  /** The open agent step of this message, or a new one: the CLI prints a response's blocks one line each. */
  #agent(messageId: string | undefined, seq: number, extra: Obj): { step: AtifStep; calls: ToolItem[] } {
    if (this.#open !== undefined && messageId !== undefined && this.#open.messageId === messageId) return this.#open;
    this.#close();
    const step = this.#push({ source: "agent", message: "", llm_call_count: 1 }, seq, extra);
    const model = this.#facts.messageOf(seq)?.model;
    if (model !== undefined) step.model_name = model;
    const usage = this.#facts.usageOf(messageId);
    if (usage !== undefined) {
      step.metrics = {
        prompt_tokens: usage.input + usage.cacheRead + usage.cacheCreation,
        cached_tokens: usage.cacheRead,
        extra: { cache_creation_input_tokens: usage.cacheCreation },
      };
    }
    this.#open = { step, messageId, calls: [] };
    return this.#open;
  }

  /** Ends the open agent step: its calls become its tool_calls, their results its observation. */
  #close(): void {
    const open = this.#open;
    this.#open = undefined;
    if (open === undefined || open.calls.length === 0) return;
    open.step.tool_calls = open.calls.map(toolCall);
    const results: AtifObservationResult[] = [];
    for (const call of open.calls) {
      const result: AtifObservationResult = { source_call_id: call.id };
      if (call.result !== null) {
        result.content = call.result.text;
        result.extra = resultExtra(call.result);
      }
      const subagent = this.#subagent(call, open.step.extra ?? {});
      if (subagent !== undefined) result.subagent_trajectory_ref = [subagent];
      if (call.result !== null || subagent !== undefined) results.push(inOrder(result, RESULT_ORDER));
    }
    if (results.length > 0) open.step.observation = { results };
  }

  /** Embeds the trajectory of the subagent a call started; returns the reference to it. */
  #subagent(call: ToolItem, extra: Obj): AtifSubagentRef | undefined {
    if (call.subagent.length === 0) return undefined;
    const list = new StepList(this.#facts, this.#session, this.#agentVersion);
    const input = isObj(call.input) ? call.input : undefined;
    const prompt = stringField(input, "prompt");
    // The delegated task is the subagent's user message, unless its own lines printed it.
    if (prompt !== undefined && call.subagent[0]?.t !== "user") list.user(prompt, call.seq, extra);
    list.items(call.subagent, extra);
    const trajectoryId = `subagent-${call.id}`;
    const agentExtra: Obj = { tool_call_id: call.id };
    const subagentType = stringField(input, "subagent_type");
    if (subagentType !== undefined) agentExtra["subagent_type"] = subagentType;
    const embedded: AtifTrajectory = {
      schema_version: ATIF_SCHEMA_VERSION,
      trajectory_id: trajectoryId,
      agent: { name: ATIF_AGENT_NAME, version: this.#agentVersion, extra: agentExtra },
      steps: list.steps,
    };
    if (this.#session !== undefined) embedded.session_id = this.#session;
    if (list.subagents.length > 0) embedded.subagent_trajectories = list.subagents;
    this.subagents.push(inOrder(embedded, TRAJECTORY_ORDER));
    const ref: AtifSubagentRef = { trajectory_id: trajectoryId };
    if (this.#session !== undefined) ref.session_id = this.#session;
    return ref;
  }

  #push(step: Omit<AtifStep, "step_id">, seq: number | null, extra: Obj): AtifStep {
    const full: AtifStep = { step_id: this.#steps.length + 1, ...step };
    const timestamp = this.#facts.timeOf(seq);
    if (timestamp !== undefined) full.timestamp = timestamp;
    if (Object.keys(extra).length > 0) full.extra = { ...extra };
    this.#steps.push(full);
    return full;
  }
}

function toolCall(call: ToolItem): AtifToolCall {
  const out: AtifToolCall = {
    tool_call_id: call.id,
    function_name: call.name === "" ? "unknown" : call.name,
    // ATIF wants an object; a call whose input was not one keeps it in extra.
    arguments: isObj(call.input) ? call.input : {},
  };
  if (call.input !== null && !isObj(call.input)) out.extra = { input: call.input };
  return out;
}

function resultExtra(result: { isError: boolean; droppedChars: number }, toolUseId?: string): Obj {
  const extra: Obj = { is_error: result.isError };
  if (result.droppedChars > 0) extra["truncated_chars"] = result.droppedChars;
  if (toolUseId !== undefined) extra["tool_use_id"] = toolUseId;
  return extra;
}

// Field orders of the RFC's tables, so a file reads as the RFC's examples do.
const TRAJECTORY_ORDER = [
  "schema_version",
  "session_id",
  "trajectory_id",
  "agent",
  "steps",
  "notes",
  "final_metrics",
  "extra",
  "subagent_trajectories",
] as const satisfies ReadonlyArray<keyof AtifTrajectory>;
const AGENT_ORDER = ["name", "version", "model_name", "extra"] as const satisfies ReadonlyArray<keyof AtifAgent>;
const STEP_ORDER = [
  "step_id",
  "timestamp",
  "source",
  "model_name",
  "message",
  "tool_calls",
  "observation",
  "metrics",
  "llm_call_count",
  "extra",
] as const satisfies ReadonlyArray<keyof AtifStep>;
const RESULT_ORDER = ["source_call_id", "content", "subagent_trajectory_ref", "extra"] as const satisfies ReadonlyArray<
  keyof AtifObservationResult
>;

/** A copy of `value` with its fields in `order` (every field of the type is listed there). */
function inOrder<T extends object>(value: T, order: ReadonlyArray<keyof T>): T {
  const out: Partial<T> = {};
  for (const key of order) if (value[key] !== undefined) out[key] = value[key];
  return out as T;
}
