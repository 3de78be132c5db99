// What a supervised tool call looks like from the hub: the hook input the CLI sends (zod: it comes
// from another process), the risk class of a tool, and the input summary operators see.
import { z as zod } from "zod";
import type { RiskClass } from "../events/index.ts";
import { createHash } from "node:crypto";
import { stableJson, unsafeCharacter } from "../kernel/index.ts";

/** Supervised unless a job names them in `unsupervisedTools`; every MCP tool (`mcp__*`) is supervised always. */
export const DEFAULT_RISKY_TOOLS: readonly string[] = [
  "Bash",
  "Monitor",
  "Write",
  "Edit",
  "MultiEdit",
  "NotebookEdit",
  "WebFetch",
];

/** Tools that run a shell command line (Monitor runs one and streams its output). */
export const SHELL_TOOLS: ReadonlySet<string> = new Set(["Bash", "Monitor"]);

/** What the CLI writes to a PreToolUse hook's stdin (unknown fields kept). */
export const hookInputSchema = zod.looseObject({
  hook_event_name: zod.literal("PreToolUse"),
  tool_name: zod.string().min(1).max(200),
  tool_input: zod.record(zod.string(), zod.unknown()),
  tool_use_id: zod.string().max(200).optional(),
  session_id: zod.string().max(200).optional(),
  cwd: zod.string().optional(),
  permission_mode: zod.string().optional(),
});
export type HookInput = zod.infer<typeof hookInputSchema>;

export function riskClassOf(tool: string): RiskClass {
  if (SHELL_TOOLS.has(tool)) return "exec";
  if (tool === "Write" || tool === "Edit" || tool === "MultiEdit" || tool === "NotebookEdit") return "write";
  if (tool === "WebFetch" || tool === "WebSearch") return "network";
  return "other";
}

/**
 * sha256 (hex) of a call's exact input, keys sorted: a parked call's re-asked input must have the
 * digest its request recorded (the CLI reads the call back from the session file, which is not trusted).
 */
export function inputDigestOf(toolInput: Record<string, unknown>): string {
  return createHash("sha256").update(stableJson(toolInput)).digest("hex");
}

/** Anything with `scrub(text)`: the telemetry scrubber, passed in (this folder may not import it). */
export interface TextScrubber {
  scrub(text: string): string;
}

const clip = (s: string, n: number): string => (s.length <= n ? s : `${s.slice(0, n)}… (${s.length} chars)`);

/** One line for operators: the command, path or URL, sizes instead of contents. */
export function summarizeInput(tool: string, input: Record<string, unknown>, scrubber?: TextScrubber): string {
  const stringField = (k: string): string | undefined =>
    typeof input[k] === "string" ? (input[k] as string) : undefined;
  let text: string;
  switch (tool) {
    case "Bash":
      text =
        clip(stringField("command") ?? "", 2000) +
        (stringField("description") ? `  # ${clip(stringField("description")!, 200)}` : "");
      break;
    case "Monitor": {
      const ws = input["ws"] as { url?: unknown } | undefined;
      const what = stringField("command") ?? (typeof ws?.url === "string" ? `websocket ${ws.url}` : "?");
      text = clip(what, 2000) + (stringField("description") ? `  # ${clip(stringField("description")!, 200)}` : "");
      break;
    }
    case "Write":
      text = `${stringField("file_path") ?? "?"} (${(stringField("content") ?? "").length} chars)`;
      break;
    case "Edit":
      text = `${stringField("file_path") ?? "?"} (replace ${(stringField("old_string") ?? "").length} chars with ${(stringField("new_string") ?? "").length})`;
      break;
    case "MultiEdit":
      text = `${stringField("file_path") ?? "?"} (${Array.isArray(input["edits"]) ? input["edits"].length : 0} edits)`;
      break;
    case "NotebookEdit":
      text = `${stringField("notebook_path") ?? "?"} (${stringField("edit_mode") ?? "replace"})`;
      break;
    case "WebFetch":
      text = clip(stringField("url") ?? "", 1000);
      break;
    default:
      text = clip(JSON.stringify(input), 1000);
  }
  return scrubber === undefined ? text : scrubber.scrub(text);
}

const MARKER = /\[REDACTED:([A-Za-z0-9_.-]+)\]/g;

function markerCounts(text: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const marker of text.matchAll(MARKER)) counts.set(marker[1]!, (counts.get(marker[1]!) ?? 0) + 1);
  return counts;
}

/**
 * Scrubs `text` and says what was taken out: the names of the markers the scrubber added, or
 * `scrubbed` when it changed the text without one (a custom hook). Empty when nothing changed.
 */
export function scrubReport(text: string, scrubber: TextScrubber | undefined): { text: string; redacted: string[] } {
  if (scrubber === undefined) return { text, redacted: [] };
  const out = scrubber.scrub(text);
  if (out === text) return { text, redacted: [] };
  const before = markerCounts(text);
  const added = [...markerCounts(out)].filter(([name, n]) => n > (before.get(name) ?? 0)).map(([name]) => name);
  return { text: out, redacted: added.length > 0 ? added.sort() : ["scrubbed"] };
}

/** Fields of known tools that an operator is shown (contents are shown as sizes only); true: a multi-line field. */
const SHOWN_FIELDS: Readonly<Record<string, Readonly<Record<string, boolean>>>> = {
  Bash: { command: true, description: false },
  Monitor: { command: true, description: false },
  Write: { file_path: false },
  Edit: { file_path: false },
  MultiEdit: { file_path: false },
  NotebookEdit: { notebook_path: false, edit_mode: false },
  WebFetch: { url: false },
};

/** Every string inside a value with its path (`a.b[0]`), for a tool whose whole input is shown. */
function* stringsIn(value: unknown, path: string): Generator<[string, string]> {
  if (typeof value === "string") yield [path, value];
  else if (Array.isArray(value))
    for (const [index, item] of value.entries()) yield* stringsIn(item, `${path}[${index}]`);
  else if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) yield* stringsIn(item, path === "" ? key : `${path}.${key}`);
  }
}

/**
 * Why a call cannot be put to an operator, or undefined: a field they would be shown (the tool name, a
 * command, its description, a path, a URL, or any string of a tool whose whole input is shown) carries
 * a control, bidi or invisible format character, which could make the request look like another one.
 * A command may span lines (newlines and tabs are allowed there); nothing else may.
 */
export function unsafeShownField(tool: string, input: Record<string, unknown>): string | undefined {
  const fields: Array<[string, unknown, boolean]> = [["tool name", tool, false]];
  const known = SHOWN_FIELDS[tool];
  if (known !== undefined) {
    for (const [name, multiline] of Object.entries(known)) fields.push([name, input[name], multiline]);
    if (tool === "Monitor") fields.push(["ws.url", (input["ws"] as { url?: unknown } | undefined)?.url, false]);
  } else {
    for (const [path, text] of stringsIn(input, "")) fields.push([path, text, true]);
  }
  for (const [name, value, multiline] of fields) {
    if (typeof value !== "string") continue;
    const bad = unsafeCharacter(value, { multiline });
    if (bad !== undefined) return `the call's ${name} carries the character ${bad.escaped} at index ${bad.index}`;
  }
  return undefined;
}
