// Turns written straight into the log with the times a test chooses (as an import of an older log
// holds them): a turn queued, one attempt with its tool calls, model calls and result line, and its
// end. The fleet charts and timelines place turns by these times, so a test can put them in and out
// of a window and know every figure the page should draw.
import { randomUUID } from "node:crypto";
import type { EventInput, EventLog } from "../../src/log/index.ts";

export interface PlantedTool {
  name: string;
  isError: boolean;
  atMs: number;
  endMs: number;
}

export interface PlantedModelCall {
  atMs: number;
  durationMs: number;
  ttfbMs: number;
  status: number;
}

export interface PlantedTurn {
  turn: string;
  tenant?: string;
  labels?: Record<string, string>;
  prompt?: string;
  cwd?: string;
  queuedMs: number;
  startedMs: number;
  /** When it ended; its outcome says how. */
  endedMs: number;
  outcome: "finished" | "failed" | "cancelled";
  errorKind?: string;
  costUsd?: number;
  /** Assistant text of the attempt. */
  text?: string;
  tools?: PlantedTool[];
  modelCalls?: PlantedModelCall[];
  worker?: string;
}

const iso = (ms: number): string => new Date(ms).toISOString();

const line = (cliSession: string, message: unknown, type = "assistant"): string =>
  JSON.stringify({ type, message, parent_tool_use_id: null, session_id: cliSession });

/** The cli.line and model.call events of the attempt, in time order. */
function attemptEvents(spec: PlantedTurn, attempt: number, cliSession: string): EventInput[] {
  const timed: Array<{ atMs: number; event: EventInput }> = [];
  const at = (ms: number, kind: string, data: unknown): void => {
    timed.push({ atMs: ms, event: { turn: spec.turn, attempt, kind, at: iso(ms), data } });
  };
  (spec.tools ?? []).forEach((tool, index) => {
    const id = `toolu_${spec.turn}_${index}`;
    at(tool.atMs, "cli.line", {
      raw: line(cliSession, {
        id: `m_${spec.turn}_${index}`,
        role: "assistant",
        model: "m",
        content: [{ type: "tool_use", id, name: tool.name, input: { command: `step ${index}` } }],
      }),
    });
    at(tool.endMs, "cli.line", {
      raw: line(
        cliSession,
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: id, content: `out ${index}`, is_error: tool.isError }],
        },
        "user",
      ),
    });
  });
  for (const call of spec.modelCalls ?? [])
    at(call.atMs, "model.call", {
      startedAt: iso(call.atMs),
      method: "POST",
      path: "/v1/messages",
      model: "claude-test",
      stream: true,
      status: call.status,
      ttfbMs: call.ttfbMs,
      durationMs: call.durationMs,
    });
  if (spec.text !== undefined)
    at(spec.endedMs - 2, "cli.line", {
      raw: line(cliSession, {
        id: `m_${spec.turn}_text`,
        role: "assistant",
        model: "m",
        content: [{ type: "text", text: spec.text }],
      }),
    });
  at(spec.endedMs - 1, "cli.line", {
    raw: JSON.stringify({
      type: "result",
      subtype: spec.outcome === "finished" ? "success" : "error_during_execution",
      is_error: spec.outcome !== "finished",
      session_id: cliSession,
      total_cost_usd: spec.costUsd ?? 0,
      num_turns: 1,
      duration_ms: spec.endedMs - spec.startedMs,
      result: "done",
      usage: { input_tokens: 1, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    }),
  });
  return timed.sort((a, b) => a.atMs - b.atMs).map(({ event }) => event);
}

function endEvent(spec: PlantedTurn, attempt: number): EventInput {
  const at = iso(spec.endedMs);
  if (spec.outcome === "finished")
    return { turn: spec.turn, attempt, at, kind: "turn.finished", data: { attempt, costUsd: spec.costUsd ?? 0 } };
  if (spec.outcome === "cancelled")
    return { turn: spec.turn, attempt, at, kind: "turn.cancelled", data: { attempt, reason: "test" } };
  return {
    turn: spec.turn,
    attempt,
    at,
    kind: "turn.failed",
    data: {
      attempt,
      errorKind: spec.errorKind ?? "cli_error",
      error: { name: "Error", message: "planted" },
      retryable: false,
    },
  };
}

/** Writes one turn of `session` as `spec` says. */
export async function plantTurn(log: EventLog, session: string, spec: PlantedTurn): Promise<void> {
  const cwd = spec.cwd ?? "/work/planted";
  await log.appendUnfenced(session, [
    {
      turn: spec.turn,
      attempt: 0,
      kind: "turn.queued",
      at: iso(spec.queuedMs),
      data: {
        prompt: spec.prompt ?? `do ${spec.turn}`,
        cwd,
        ...(spec.tenant === undefined ? {} : { tenant: spec.tenant }),
        ...(spec.labels === undefined ? {} : { labels: spec.labels }),
      },
    },
  ]);
  const { epoch, attempt } = await log.beginAttempt(session, spec.turn);
  await log.append(session, epoch, [
    {
      turn: spec.turn,
      attempt,
      kind: "attempt.started",
      at: iso(spec.startedMs),
      data: { worker: spec.worker ?? "planted-worker", attempt, cwd },
    },
    ...attemptEvents(spec, attempt, randomUUID()),
    endEvent(spec, attempt),
  ]);
}
