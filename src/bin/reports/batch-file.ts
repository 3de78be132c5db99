// The batch file of `turnstream batch`: JSONL, one turn per line (blank lines skipped), each line the
// producer's enqueue input (session, prompt — a template when it has {{placeholders}} — variables,
// cwd, options, idempotencyKey, onLostSession) plus an optional `label` for the reports. Every line is
// checked the way the producer checks an enqueue before any is enqueued, so one bad line stops the
// batch with nothing queued. A relative or missing cwd is taken from the directory the command runs
// in, as `turnstream run --cwd` does.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import {
  enqueueInputSchema,
  firstRefusedEnvName,
  InvalidTurnError,
  MissingVariableError,
  parseOrThrow,
  renderPrompt,
  type EnqueueInput,
} from "../../queue/index.ts";
import { secretShapeIn } from "../../telemetry/patterns.ts";

export interface BatchTurn {
  /** 1-based line of the batch file. */
  line: number;
  label: string;
  input: EnqueueInput;
}

/** The batch file cannot be read or holds a bad line: exit 2, nothing enqueued. */
export class BatchFileError extends Error {
  override readonly name = "BatchFileError";
}

const LABEL_MAX = 200;
/** How much of a prompt names a turn that has no label. */
const PROMPT_START = 60;
/** Bad lines listed before the rest are summed up, so a wholly wrong file does not flood the terminal. */
const PROBLEMS_SHOWN = 10;

/** A line's JSON object, or a BatchFileError-worthy problem. */
function objectOf(text: string): Record<string, unknown> | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return `not JSON (${(err as Error).message})`;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return "must be a JSON object (one turn per line)";
  return value as Record<string, unknown>;
}

/** The producer's own checks, in its order: schema, template, secret-shaped text, env names. */
function checkEnqueue(input: EnqueueInput): string {
  const req = parseOrThrow(enqueueInputSchema, input);
  const rendered = renderPrompt(req.prompt, req.variables);
  const texts: Array<[string, string | undefined]> = [["prompt", req.prompt], ["variables", rendered === req.prompt ? undefined : rendered], ["options.appendSystemPrompt", req.options?.appendSystemPrompt]];
  for (const [field, text] of texts) {
    const shape = text === undefined ? undefined : secretShapeIn(text);
    if (shape !== undefined) throw new InvalidTurnError(field, `holds what looks like a secret (${shape}); pass it as options.env: { NAME: { fromEnv: "<worker env var>" } }`);
  }
  const refused = firstRefusedEnvName(Object.keys(req.options?.env ?? {}), new Set());
  if (refused !== undefined) throw new InvalidTurnError(`options.env.${refused.name}`, refused.why);
  return rendered;
}

function labelOf(label: unknown, rendered: string): string | string[] {
  if (label === undefined) {
    const oneLine = rendered.replace(/\s+/g, " ").trim();
    return oneLine.length > PROMPT_START ? `${oneLine.slice(0, PROMPT_START - 1)}…` : oneLine;
  }
  if (typeof label === "string" && label.length > 0 && label.length <= LABEL_MAX) return label;
  return [`\`label\` must be a string of 1-${LABEL_MAX} characters`];
}

/** One line as a turn, or what is wrong with it. */
function turnOfLine(text: string, line: number, baseDir: string): BatchTurn | string {
  const object = objectOf(text);
  if (typeof object === "string") return object;
  const { label, ...fields } = object;
  if (typeof fields["cwd"] === "string" || fields["cwd"] === undefined) fields["cwd"] = resolve(baseDir, (fields["cwd"] as string | undefined) ?? ".");
  const input = fields as unknown as EnqueueInput;
  try {
    const named = labelOf(label, checkEnqueue(input));
    return typeof named === "string" ? { line, label: named, input } : named[0]!;
  } catch (err) {
    if (err instanceof InvalidTurnError || err instanceof MissingVariableError) return err.message;
    throw err;
  }
}

function readBatchText(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new BatchFileError(`${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? "error"}); check the path`);
  }
}

function problemsError(path: string, problems: readonly string[]): BatchFileError {
  const shown = problems.slice(0, PROBLEMS_SHOWN);
  const more = problems.length > shown.length ? [`… and ${problems.length - shown.length} more bad line(s)`] : [];
  return new BatchFileError([`${path}: ${problems.length} bad line(s), nothing was enqueued`, ...shown, ...more].join("\n"));
}

/** Every turn of the batch file; throws BatchFileError naming each bad line and its field. */
export function loadBatchFile(path: string, baseDir: string = process.cwd()): BatchTurn[] {
  const turns: BatchTurn[] = [];
  const problems: string[] = [];
  readBatchText(path)
    .split("\n")
    .forEach((text, i) => {
      if (text.trim() === "") return;
      const turn = turnOfLine(text, i + 1, baseDir);
      if (typeof turn === "string") problems.push(`${path} line ${i + 1}: ${turn}`);
      else turns.push(turn);
    });
  if (problems.length > 0) throw problemsError(path, problems);
  if (turns.length === 0) throw new BatchFileError(`${path} holds no turns; write one JSON object per line`);
  return turns;
}
