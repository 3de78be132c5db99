// The batch file of `turnstream batch`: JSONL, one turn per line (blank lines skipped), or a YAML
// list of turns (a file named .yaml or .yml); each turn is the producer's enqueue input (session, prompt — a template
// when it has {{placeholders}} — variables, cwd, options, idempotencyKey, onLostSession, labels, tenant) plus an
// optional `label` for the reports (the report's name for the turn, not one of its `labels`). Every line is
// checked the way the producer checks an enqueue before any is enqueued, so one bad line stops the
// batch with nothing queued. A relative or missing cwd is taken from the directory the command runs
// in, as `turnstream run --cwd` does. An entry naming `rerun` instead re-runs a recorded session (as
// `turnstream rerun` does): `turn` and `cwd` as that command's flags, a missing cwd the recorded one.
import { TurnstreamError } from "../../kernel/index.ts";
import { readFileSync } from "node:fs";
import { isNode, isSeq, LineCounter, parseDocument } from "yaml";
import { resolve } from "node:path";
import { isValidSessionId } from "../../log/index.ts";
import {
  checkEnqueue,
  enqueueInputSchema,
  InvalidTurnError,
  MissingVariableError,
  parseOrThrow,
  type EnqueueInput,
} from "../../queue/index.ts";
import { workspaceProblem } from "../commands/_rerun.ts";
import { RERUN_PERMISSION_MODES, type RerunPermissionMode } from "../../rerun/index.ts";

export interface BatchTurn {
  /** 1-based line of the batch file. */
  line: number;
  label: string;
  input: EnqueueInput;
}

/** A re-run of a recorded session, reported as one test case. */
export interface BatchRerun {
  line: number;
  label: string;
  rerun: {
    session: string;
    /** A turn id, or its 1-based number in the session; undefined: every turn. */
    turn: string | undefined;
    /** Absolute; required: a recording never says where its re-run works. */
    cwd: string;
    /** The permission mode granted to the re-run (`permissionMode`); default `default`. */
    permissionMode: RerunPermissionMode;
  };
}

export type BatchEntry = BatchTurn | BatchRerun;

export const isRerun = (e: BatchEntry): e is BatchRerun => "rerun" in e;

/** The batch file cannot be read or holds a bad line: exit 2, nothing enqueued. */
export class BatchFileError extends TurnstreamError {
  constructor(message: string) {
    super(message, { code: "batch_file" });
  }
}

const LABEL_MAX = 200;
/** How much of a prompt names a turn that has no label. */
const PROMPT_START = 60;
/** Bad lines listed before the rest are summed up, so a wholly wrong file does not flood the terminal. */
const PROBLEMS_SHOWN = 10;

/** One turn of the file before its checks: the value found and the 1-based line it starts on. */
interface Entry {
  line: number;
  value: unknown;
}

function asObject(value: unknown): Record<string, unknown> | string {
  if (value === null || typeof value !== "object" || Array.isArray(value))
    return "must be an object with the turn's fields";
  return value as Record<string, unknown>;
}

function jsonlEntries(text: string): Array<Entry | string> {
  const out: Array<Entry | string> = [];
  text.split("\n").forEach((lineText, index) => {
    if (lineText.trim() === "") return;
    try {
      out.push({ line: index + 1, value: JSON.parse(lineText) as unknown });
    } catch (err) {
      out.push(`line ${index + 1}: not JSON (${(err as Error).message})`);
    }
  });
  return out;
}

function yamlEntries(text: string): Array<Entry | string> {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines });
  if (doc.errors.length > 0)
    return doc.errors.map((e) => `line ${e.linePos?.[0].line ?? "?"}: not YAML (${e.message.split("\n")[0]})`);
  if (!isSeq(doc.contents)) return ["line 1: must be a YAML list of turns (- prompt: …)"];
  return doc.contents.items.map((item) => ({
    line: lines.linePos(isNode(item) ? (item.range?.[0] ?? 0) : 0).line,
    value: isNode(item) ? item.toJSON() : item,
  }));
}

function labelOf(label: unknown, rendered: string): string | string[] {
  if (label === undefined) {
    const oneLine = rendered.replace(/\s+/g, " ").trim();
    return oneLine.length > PROMPT_START ? `${oneLine.slice(0, PROMPT_START - 1)}…` : oneLine;
  }
  if (typeof label === "string" && label.length > 0 && label.length <= LABEL_MAX) return label;
  return [`\`label\` must be a string of 1-${LABEL_MAX} characters`];
}

const RERUN_FIELDS = ["rerun", "turn", "cwd", "permissionMode", "label"];

function rerunTurnOf(turn: unknown): string | undefined | { problem: string } {
  if (turn === undefined) return undefined;
  if (typeof turn === "number" && Number.isInteger(turn) && turn >= 1) return String(turn);
  if (typeof turn === "string" && /^[A-Za-z0-9_.:-]{1,200}$/.test(turn)) return turn;
  return { problem: "`turn` must be a turn id or the turn's number in the session (1 is the first)" };
}

/** A `rerun` entry as a re-run, or what is wrong with it. */
function rerunOfEntry(line: number, object: Record<string, unknown>, baseDir: string): BatchRerun | string {
  const unknown = Object.keys(object).filter((k) => !RERUN_FIELDS.includes(k));
  if (unknown.length > 0)
    return `a re-run entry takes ${RERUN_FIELDS.map((f) => `\`${f}\``).join(", ")}; not ${unknown.map((f) => `\`${f}\``).join(", ")}`;
  const { rerun: session, cwd, label } = object;
  if (typeof session !== "string" || !isValidSessionId(session))
    return "`rerun` must be the recorded session's id (1-128 characters from A-Z a-z 0-9 _ . -)";
  const turn = rerunTurnOf(object["turn"]);
  if (typeof turn === "object") return turn.problem;
  if (cwd === undefined) {
    return "a re-run entry needs `cwd`: a re-run works where you say, never in the cwd its recording names";
  }
  if (typeof cwd !== "string" || cwd === "") return "`cwd` must be a directory path";
  const dir = resolve(baseDir, cwd);
  const problem = workspaceProblem(dir);
  if (problem !== undefined) return `\`cwd\` ${problem}`;
  const mode = object["permissionMode"] ?? "default";
  if (typeof mode !== "string" || !(RERUN_PERMISSION_MODES as readonly string[]).includes(mode)) {
    return `\`permissionMode\` must be one of ${RERUN_PERMISSION_MODES.join(", ")}`;
  }
  const named = labelOf(label, `rerun ${session}${turn === undefined ? "" : ` turn ${turn}`}`);
  const rerun = { session, turn, cwd: dir, permissionMode: mode as RerunPermissionMode };
  return typeof named === "string" ? { line, label: named, rerun } : named[0]!;
}

/** One entry as a turn or a re-run, or what is wrong with it. */
function turnOfEntry({ line, value }: Entry, baseDir: string): BatchEntry | string {
  const object = asObject(value);
  if (typeof object === "string") return object;
  if ("rerun" in object) return rerunOfEntry(line, object, baseDir);
  const { label, ...fields } = object;
  if (typeof fields["cwd"] === "string" || fields["cwd"] === undefined)
    fields["cwd"] = resolve(baseDir, (fields["cwd"] as string | undefined) ?? ".");
  try {
    const input: EnqueueInput = parseOrThrow(enqueueInputSchema, fields);
    const named = labelOf(label, checkEnqueue(input).prompt);
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
    throw new BatchFileError(
      `${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? "error"}); check the path`,
    );
  }
}

function problemsError(path: string, problems: readonly string[]): BatchFileError {
  const shown = problems.slice(0, PROBLEMS_SHOWN);
  const more = problems.length > shown.length ? [`… and ${problems.length - shown.length} more bad line(s)`] : [];
  return new BatchFileError(
    [`${path}: ${problems.length} bad line(s), nothing was enqueued`, ...shown, ...more].join("\n"),
  );
}

/** Every turn and re-run of the batch file; throws BatchFileError naming each bad line and its field. */
export function loadBatchFile(path: string, baseDir: string = process.cwd()): BatchEntry[] {
  const turns: BatchEntry[] = [];
  const problems: string[] = [];
  const text = readBatchText(path);
  for (const entry of /\.ya?ml$/i.test(path) ? yamlEntries(text) : jsonlEntries(text)) {
    const turn = typeof entry === "string" ? entry : turnOfEntry(entry, baseDir);
    if (typeof turn !== "string") turns.push(turn);
    else problems.push(`${path} ${typeof entry === "string" ? "" : `line ${entry.line}: `}${turn}`);
  }
  if (problems.length > 0) throw problemsError(path, problems);
  if (turns.length === 0)
    throw new BatchFileError(`${path} holds no turns; write one JSON object per line, or a YAML list`);
  return turns;
}
