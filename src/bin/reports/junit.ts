// `turnstream batch --junit FILE`: one <testcase> per turn, in the JUnit XML shape Jenkins, GitLab and
// the GitHub test-report actions read (testsuites > testsuite > testcase, counts on both suites).
// How outcomes map: finished passes; a task failure or a timeout is a <failure> (the turn ran and did
// not do the job in its limits); usage and infrastructure are an <error> (the turn could not run as
// written); cancelled is <skipped>, and so is a turn that parked on a supervised call and was left
// waiting for its decision (--exit-on-park): its message says how to decide it. The type attribute is
// the turn's error kind.
import type { Outcome } from "../exit-codes.ts";
import { seeCommand, type BatchReport, type BatchTurnResult } from "./turn-result.ts";

/**
 * Characters XML 1.0 cannot hold at all, even as character references: C0 controls other than tab,
 * newline and carriage return, lone surrogates, U+FFFE and U+FFFF. Each becomes a visible `\uXXXX`.
 */
const NOT_XML =
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

const visible = (c: string): string => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;

/** Text content: markup characters escaped, impossible characters shown as \uXXXX. */
export function xmlText(text: string): string {
  return text
    .replace(NOT_XML, visible)
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll("\r", "&#13;");
}

/** An attribute value: as text, plus quotes, and whitespace kept from attribute-value normalisation. */
export function xmlAttr(text: string): string {
  return xmlText(text)
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&apos;")
    .replaceAll("\n", "&#10;")
    .replaceAll("\t", "&#9;");
}

const seconds3 = (s: number): string => s.toFixed(3);

type Verdict = "passed" | "failure" | "error" | "skipped";

const VERDICT_OF_OUTCOME: Readonly<Record<Outcome, Verdict>> = {
  finished: "passed",
  task_failed: "failure",
  timed_out: "failure",
  usage: "error",
  infrastructure: "error",
  cancelled: "skipped",
  parked: "skipped",
  over_budget: "error",
};

function verdictElement(result: BatchTurnResult, verdict: Verdict): string | undefined {
  if (verdict === "passed") return undefined;
  const message = result.message ?? `${result.status}${result.errorKind === undefined ? "" : ` (${result.errorKind})`}`;
  if (verdict === "skipped") return `      <skipped message="${xmlAttr(message)}"/>`;
  const type = result.errorKind ?? (result.status === "unended" ? result.outcome : result.status);
  return `      <${verdict} message="${xmlAttr(message)}" type="${xmlAttr(type)}">${xmlText(message)}</${verdict}>`;
}

function systemOut(result: BatchTurnResult): string {
  const lines = [
    `turn ${result.turn} (batch file line ${result.line}): ${result.status}, attempt ${result.attempts}, ${result.toolCalls} tool call(s)`,
    `see the run: ${seeCommand(result)}`,
  ];
  if (result.decideCommand !== undefined) lines.push(`decide it: ${result.decideCommand}`);
  if (result.resultText !== undefined) lines.push(`result: ${result.resultText}`);
  return `      <system-out>${xmlText(lines.join("\n"))}</system-out>`;
}

function testcase(result: BatchTurnResult): string {
  const open = `    <testcase name="${xmlAttr(result.label)}" classname="${xmlAttr(result.session)}" time="${seconds3(result.seconds)}">`;
  const properties = [
    "      <properties>",
    `        <property name="attempts" value="${result.attempts}"/>`,
    `        <property name="turn" value="${xmlAttr(result.turn)}"/>`,
    `        <property name="outcome" value="${result.outcome}"/>`,
    ...(result.tenant === undefined ? [] : [`        <property name="tenant" value="${xmlAttr(result.tenant)}"/>`]),
    "      </properties>",
  ];
  const verdict = verdictElement(result, VERDICT_OF_OUTCOME[result.outcome]);
  return [open, ...properties, ...(verdict === undefined ? [] : [verdict]), systemOut(result), "    </testcase>"].join(
    "\n",
  );
}

/** The tests/failures/errors/skipped/time attributes both suite elements carry. */
function countAttributes(report: BatchReport): string {
  const count = (v: Verdict): number => report.turns.filter((t) => VERDICT_OF_OUTCOME[t.outcome] === v).length;
  return `tests="${report.turns.length}" failures="${count("failure")}" errors="${count("error")}" skipped="${count("skipped")}" time="${seconds3(report.seconds)}"`;
}

/** The whole JUnit document of a batch. */
export function junitXml(report: BatchReport): string {
  const counts = countAttributes(report);
  const name = xmlAttr(`turnstream batch ${report.file}`);
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="${name}" ${counts}>`,
    `  <testsuite name="${name}" ${counts} timestamp="${report.startedAt}">`,
    ...report.turns.map(testcase),
    "  </testsuite>",
    "</testsuites>",
    "",
  ].join("\n");
}
