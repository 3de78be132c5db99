// Two runs of the same turns side by side: the recorded one and a re-run. What is compared is what
// the agent did and got (each tool call's name and input, each result's text and error flag) and how
// the turn ended (status, error kind, result text), all normalised by the rule the scripted server
// checks with (normaliseRunText), so ids, times and where each run happened never count as a change.
import { stableJson } from "../kernel/index.ts";
import { foldMessages } from "../protocol/index.ts";
import { normaliseRunText } from "../testing/index.ts";
import type { RecordedTurn, TurnStatus } from "./record.ts";

/** One tool call of a run, normalised. */
export interface RunStep {
  tool: string;
  input: string;
  result: { text: string; isError: boolean } | undefined;
}

export interface Difference {
  /** 1-based tool call number, or `end` for how the turn ended. */
  step: number | "end";
  what: string;
  recorded: string;
  rerun: string;
}

export interface TurnComparison {
  /** 1-based turn number in the comparison. */
  index: number;
  recordedTurn: string;
  rerunTurn: string | undefined;
  prompt: string;
  match: boolean;
  /** The first tool call that differs (or `end`), when the runs differ. */
  partedAt: number | "end" | undefined;
  steps: number;
  differences: Difference[];
  /** Why the scripted server refused a request of the re-run, when it did. */
  divergence: string | undefined;
}

export interface RerunComparison {
  match: boolean;
  turns: TurnComparison[];
}

/** The tool calls of a run in call order (subagents' included), normalised against its cwd. */
export function runSteps(turn: RecordedTurn): RunStep[] {
  const norm = (text: string): string => normaliseRunText(text, turn.cwd);
  return [...foldMessages(turn.lines).toolCalls.values()].map((c) => ({
    tool: c.name,
    input: norm(stableJson(c.input)),
    result: c.result === undefined ? undefined : { text: norm(c.result.text), isError: c.result.isError },
  }));
}

const NONE = "(none)";
const resultText = (r: RunStep["result"]): string =>
  r === undefined ? "(no result)" : `${r.isError ? "error: " : ""}${JSON.stringify(r.text)}`;
const endingText = (status: TurnStatus, errorKind: string | undefined): string =>
  `${status}${errorKind === undefined ? "" : ` (${errorKind})`}`;

function stepDifferences(n: number, a: RunStep | undefined, b: RunStep | undefined): Difference[] {
  const call = (s: RunStep | undefined): string => (s === undefined ? NONE : `${s.tool} ${s.input}`);
  if (a === undefined || b === undefined || a.tool !== b.tool || a.input !== b.input)
    return [{ step: n, what: "tool call", recorded: call(a), rerun: call(b) }];
  if (a.result?.isError !== b.result?.isError || a.result?.text !== b.result?.text)
    return [{ step: n, what: `tool result of ${a.tool}`, recorded: resultText(a.result), rerun: resultText(b.result) }];
  return [];
}

function endDifferences(a: RecordedTurn, b: RecordedTurn | undefined): Difference[] {
  const out: Difference[] = [];
  const bEnding = b?.ending ?? { status: "unended" as const, errorKind: undefined, resultText: undefined };
  if (a.ending.status !== bEnding.status || a.ending.errorKind !== bEnding.errorKind) {
    out.push({
      step: "end",
      what: "ending",
      recorded: endingText(a.ending.status, a.ending.errorKind),
      rerun: endingText(bEnding.status, bEnding.errorKind),
    });
  }
  const text = (t: RecordedTurn | undefined): string =>
    t?.ending.resultText === undefined ? NONE : JSON.stringify(normaliseRunText(t.ending.resultText, t.cwd));
  if (text(a) !== text(b)) out.push({ step: "end", what: "result text", recorded: text(a), rerun: text(b) });
  return out;
}

/** One recorded turn against its re-run (undefined when the re-run never got to it). */
export function compareTurn(
  index: number,
  recorded: RecordedTurn,
  rerun: RecordedTurn | undefined,
  divergence?: string,
): TurnComparison {
  const a = runSteps(recorded);
  const b = rerun === undefined ? [] : runSteps(rerun);
  const differences: Difference[] = [];
  for (let i = 0; i < Math.max(a.length, b.length); i++) differences.push(...stepDifferences(i + 1, a[i], b[i]));
  differences.push(...endDifferences(recorded, rerun));
  const match = differences.length === 0;
  return {
    index,
    recordedTurn: recorded.turn,
    rerunTurn: rerun?.turn,
    prompt: recorded.prompt,
    match,
    partedAt: differences[0]?.step,
    steps: a.length,
    differences,
    divergence,
  };
}

/** Every recorded turn against the re-run's turn at the same place. */
export function compareRuns(
  recorded: readonly RecordedTurn[],
  rerun: readonly (RecordedTurn | undefined)[],
  divergences: readonly (string | undefined)[] = [],
): RerunComparison {
  const turns = recorded.map((t, i) => compareTurn(i + 1, t, rerun[i], divergences[i]));
  return { match: turns.every((t) => t.match), turns };
}

/** How much of a long text a diff line shows. */
const SHOWN = 240;
const cut = (s: string): string =>
  s.length > SHOWN ? `${s.slice(0, SHOWN)}… (${s.length - SHOWN} more characters)` : s;
/** Differences listed per turn before the rest are counted: after the first, most follow from it. */
const LISTED = 6;

function promptStart(prompt: string): string {
  const one = prompt.replace(/\s+/g, " ").trim();
  return one.length > 60 ? `${one.slice(0, 59)}…` : one;
}

function turnLines(t: TurnComparison, total: number): string[] {
  const head = `turn ${t.index}/${total} ${t.recordedTurn} "${promptStart(t.prompt)}"`;
  if (t.match) return [`${head}: match (${t.steps} tool call(s))`];
  const parted =
    t.partedAt === "end" ? "the same tool calls, a different ending" : `the runs parted at step ${t.partedAt}`;
  const lines = [`${head}: differs, ${parted}`];
  for (const d of t.differences.slice(0, LISTED)) {
    lines.push(
      `  ${d.step === "end" ? "end" : `step ${d.step}`}: ${d.what}`,
      `    - recorded: ${cut(d.recorded)}`,
      `    + re-run:   ${cut(d.rerun)}`,
    );
  }
  if (t.differences.length > LISTED) lines.push(`  … and ${t.differences.length - LISTED} more difference(s)`);
  if (t.divergence !== undefined) lines.push(`  the recording could not answer: ${t.divergence}`);
  return lines;
}

/** The readable diff: one headline per turn, each difference as recorded (-) and re-run (+) lines. */
export function renderComparison(c: RerunComparison): string {
  const lines = c.turns.flatMap((t) => turnLines(t, c.turns.length));
  const differing = c.turns.filter((t) => !t.match).length;
  lines.push(`rerun: ${c.turns.length} turn(s), ${c.turns.length - differing} match, ${differing} differ`);
  return `${lines.join("\n")}\n`;
}
