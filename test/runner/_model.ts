// Short-hand scripts for the CLI runner's tests, served by the shipped scripted model server.
import { startModelServer, type ModelServer, type ScriptResponse } from "../../src/testing/index.ts";

export type Step =
  | { text: string }
  | { tool: { name: string; input: Record<string, unknown> }; text?: string }
  | { hang: true }
  | { error: { status: number; type: string; message: string } };

function toResponse(step: Step): ScriptResponse {
  if ("hang" in step || "error" in step) return step;
  if ("tool" in step) {
    const lead = step.text === undefined ? [] : [{ type: "text" as const, text: step.text }];
    return { content: [...lead, { type: "tool_use", name: step.tool.name, input: step.tool.input }] };
  }
  return { content: [{ type: "text", text: step.text }] };
}

export function startScriptedServer(script: Step[]): Promise<ModelServer> {
  return startModelServer({ script: { responses: script.map(toResponse) } });
}
