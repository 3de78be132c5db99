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
  return [...foldMessages(turn.lines).toolCalls.values()].map((call) => ({
    tool: call.name,
    input: norm(stableJson(call.input)),
    result: call.result === undefined ? undefined : { text: norm(call.result.text), isError: call.result.isError },
  }));
}

const NONE = "(none)";
const resultText = (r: RunStep["result"]): string =>
  r === undefined ? "(no result)" : `${r.isError ? "error: " : ""}${JSON.stringify(r.text)}`;
const endingText = (status: TurnStatus, errorKind: string | undefined): string =>
  `${status}${errorKind === undefined ? "" : ` (${errorKind})`}`;

function stepDifferences(
  step: number,
  recordedStep: RunStep | undefined,
  rerunStep: RunStep | undefined,
): Difference[] {
  const call = (s: RunStep | undefined): string => (s === undefined ? NONE : `${s.tool} ${s.input}`);
  if (
    recordedStep === undefined ||
    rerunStep === undefined ||
    recordedStep.tool !== rerunStep.tool ||
    recordedStep.input !== rerunStep.input
  )
    return [{ step: step, what: "tool call", recorded: call(recordedStep), rerun: call(rerunStep) }];
  if (
    recordedStep.result?.isError !== rerunStep.result?.isError ||
    recordedStep.result?.text !== rerunStep.result?.text
  )
    return [
      {
        step: step,
        what: `tool result of ${recordedStep.tool}`,
        recorded: resultText(recordedStep.result),
        rerun: resultText(rerunStep.result),
      },
    ];
  return [];
}

function endDifferences(recorded: RecordedTurn, rerun: RecordedTurn | undefined): Difference[] {
  const out: Difference[] = [];
  const rerunEnding = rerun?.ending ?? { status: "unended" as const, errorKind: undefined, resultText: undefined };
  if (recorded.ending.status !== rerunEnding.status || recorded.ending.errorKind !== rerunEnding.errorKind) {
    out.push({
      step: "end",
      what: "ending",
      recorded: endingText(recorded.ending.status, recorded.ending.errorKind),
      rerun: endingText(rerunEnding.status, rerunEnding.errorKind),
    });
  }
  const text = (t: RecordedTurn | undefined): string =>
    t?.ending.resultText === undefined ? NONE : JSON.stringify(normaliseRunText(t.ending.resultText, t.cwd));
  if (text(recorded) !== text(rerun))
    out.push({ step: "end", what: "result text", recorded: text(recorded), rerun: text(rerun) });
  return out;
}

/** One recorded turn against its re-run (undefined when the re-run never got to it). */
export function compareTurn(
  index: number,
  recorded: RecordedTurn,
  rerun: RecordedTurn | undefined,
  divergence?: string,
): TurnComparison {
  const recordedSteps = runSteps(recorded);
  const rerunSteps = rerun === undefined ? [] : runSteps(rerun);
  const differences: Difference[] = [];
  for (let index = 0; index < Math.max(recordedSteps.length, rerunSteps.length); index++)
    differences.push(...stepDifferences(index + 1, recordedSteps[index], rerunSteps[index]));
  differences.push(...endDifferences(recorded, rerun));
  const match = differences.length === 0;
  return {
    index,
    recordedTurn: recorded.turn,
    rerunTurn: rerun?.turn,
    prompt: recorded.prompt,
    match,
    partedAt: differences[0]?.step,
    steps: recordedSteps.length,
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

function turnLines(turn: TurnComparison, total: number): string[] {
  const head = `turn ${turn.index}/${total} ${turn.recordedTurn} "${promptStart(turn.prompt)}"`;
  if (turn.match) return [`${head}: match (${turn.steps} tool call(s))`];
  const parted =
    turn.partedAt === "end" ? "the same tool calls, a different ending" : `the runs parted at step ${turn.partedAt}`;
  const lines = [`${head}: differs, ${parted}`];
  for (const difference of turn.differences.slice(0, LISTED)) {
    lines.push(
      `  ${difference.step === "end" ? "end" : `step ${difference.step}`}: ${difference.what}`,
      `    - recorded: ${cut(difference.recorded)}`,
      `    + re-run:   ${cut(difference.rerun)}`,
    );
  }
  if (turn.differences.length > LISTED) lines.push(`  … and ${turn.differences.length - LISTED} more difference(s)`);
  if (turn.divergence !== undefined) lines.push(`  the recording could not answer: ${turn.divergence}`);
  return lines;
}

/** The readable diff: one headline per turn, each difference as recorded (-) and re-run (+) lines. */
export function renderComparison(comparison: RerunComparison): string {
  const lines = comparison.turns.flatMap((t) => turnLines(t, comparison.turns.length));
  const differing = comparison.turns.filter((t) => !t.match).length;
  lines.push(
    `rerun: ${comparison.turns.length} turn(s), ${comparison.turns.length - differing} match, ${differing} differ`,
  );
  return `${lines.join("\n")}\n`;
}
