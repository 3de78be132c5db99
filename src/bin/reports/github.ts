// `turnstream batch --github`: workflow annotations (one `::error` per failed turn, pointing at its
// line of the batch file, `::warning` for a cancelled, unended or parked one) and a Markdown step summary.
// Escaping follows the runner's workflow-command rules: % CR LF in the message, and also : , in
// property values, since those end a property.
import { countByStatus, secondsText, seeCommand, type BatchReport, type BatchTurnResult } from "./turn-result.ts";

const escapeData = (s: string): string => s.replaceAll("%", "%25").replaceAll("\r", "%0D").replaceAll("\n", "%0A");
const escapeProperty = (s: string): string => escapeData(s).replaceAll(":", "%3A").replaceAll(",", "%2C");

/** Outcomes that say the turn did not get to finish, not that it went wrong. */
const WARNING_OUTCOMES: ReadonlySet<string> = new Set(["cancelled", "timed_out", "parked"]);

function annotation(report: BatchReport, result: BatchTurnResult): string | undefined {
  if (result.outcome === "finished") return undefined;
  const level = WARNING_OUTCOMES.has(result.outcome) ? "warning" : "error";
  const kind = result.errorKind === undefined ? result.status : `${result.status}, ${result.errorKind}`;
  const title = `turnstream batch: ${result.label} (${kind})`;
  const message = `${result.message ?? result.status}\nsee the run: ${seeCommand(result)}`;
  return `::${level} file=${escapeProperty(report.file)},line=${result.line},title=${escapeProperty(title)}::${escapeData(message)}`;
}

/** The annotation lines of the turns that did not finish, in batch-file order. */
export function annotations(report: BatchReport): string[] {
  return report.turns.map((t) => annotation(report, t)).filter((a): a is string => a !== undefined);
}

/** A table cell: one line, no column breaks, no inline code breaking out. */
const cell = (s: string): string => s.replace(/[\r\n]+/g, " ").replaceAll("|", "\\|");
/**
 * A cell of plain text (a label from the batch file): the summary is rendered as Markdown with HTML,
 * so `<…>` in a label would be taken for a tag and vanish, or hide the rows after it.
 */
const textCell = (s: string): string =>
  cell(s).replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");

const STATUS_MARK: Readonly<Record<string, string>> = {
  finished: "✅",
  failed: "❌",
  cancelled: "⏭️",
  unended: "⏱️",
  parked: "⏸️",
};

function summaryRow(result: BatchTurnResult, withTenant: boolean): string {
  const status = `${STATUS_MARK[result.status] ?? ""} ${result.status}${result.errorKind === undefined ? "" : ` (${result.errorKind})`}`;
  const tenant = withTenant ? ` ${textCell(result.tenant ?? "–")} |` : "";
  return `| ${textCell(result.label)} |${tenant} ${cell(status)} | ${result.attempts} | ${secondsText(result.seconds)} | \`${cell(seeCommand(result))}\` |`;
}

/**
 * The step summary: a headline with the counts and the exit code, then one row per turn; with a
 * tenant column when a turn has a tenant.
 */
export function stepSummary(report: BatchReport): string {
  const withTenant = report.turns.some((turn) => turn.tenant !== undefined);
  const counts = countByStatus(report.turns);
  const parts = Object.entries(counts)
    .filter(([, n]) => n > 0)
    .map(([status, n]) => `${n} ${status}`);
  return [
    `### turnstream batch \`${cell(report.file)}\`: ${parts.join(", ") || "no turns"} (exit ${report.exitCode}, ${secondsText(report.seconds)})`,
    "",
    withTenant
      ? "| turn | tenant | status | attempts | time | replay |"
      : "| turn | status | attempts | time | replay |",
    withTenant ? "|---|---|---|---|---|---|" : "|---|---|---|---|---|",
    ...report.turns.map((turn) => summaryRow(turn, withTenant)),
    "",
  ].join("\n");
}
