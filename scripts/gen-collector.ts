// `npm run gen:collector`: the secret shapes of the collector's redaction (otel/collector.yaml)
// generated from the scrubber's own patterns (src/telemetry/patterns.ts), so the last line of
// defence masks what the services scrub and cannot drift from it (test/deploy/compose.test.ts
// holds the file to this output). The collector's regexes are RE2: JavaScript's lookarounds are
// dropped, which only widens what a pattern matches, and named groups become `(?P<name>…)`.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseDocument } from "yaml";
import { BUILTIN_PATTERNS, type ScrubPattern } from "../src/telemetry/patterns.ts";

export const COLLECTOR_FILE = join(dirname(fileURLToPath(import.meta.url)), "..", "otel", "collector.yaml");

/** Index just past the group that opens at `start` (a `(`), skipping escapes and character classes. */
function groupEnd(source: string, start: number): number {
  let depth = 0;
  let inClass = false;
  for (let index = start; index < source.length; index++) {
    const char = source[index];
    if (char === "\\") index++;
    else if (inClass) inClass = char !== "]";
    else if (char === "[") inClass = true;
    else if (char === "(") depth++;
    else if (char === ")" && --depth === 0) return index + 1;
  }
  throw new Error(`unbalanced group at ${start} in ${source}`);
}

/** A JavaScript regex as RE2: lookarounds dropped, named groups in RE2's spelling, `i` as `(?i)`. */
export function toRe2(regex: RegExp): string {
  const regexSource = regex.source;
  let out = "";
  let inClass = false;
  for (let index = 0; index < regexSource.length; index++) {
    const char = regexSource[index]!;
    if (char === "\\") {
      out += char + (regexSource[++index] ?? "");
    } else if (inClass) {
      inClass = char !== "]";
      out += char;
    } else if (char === "[") {
      inClass = true;
      out += char;
    } else if (/^\(\?<?[=!]/.test(regexSource.slice(index, index + 4))) {
      index = groupEnd(regexSource, index) - 1;
    } else if (regexSource.startsWith("(?<", index)) {
      out += "(?P<";
      index += 2;
    } else {
      out += char;
    }
  }
  const flags = regex.flags.replace(/[gy]/g, "");
  if (flags !== "" && flags !== "i") throw new Error(`${regex}: only the i flag has an RE2 form here`);
  // A dropped lookaround can leave an empty alternation behind: `(?:(?<!x)|(?<=y))` → `(?:|)`.
  return (flags === "i" ? "(?i)" : "") + out.replaceAll("(?:|)", "");
}

/** The pattern's marker, keeping the `keep` and `tail` groups around it as the scrubber does. */
function replacement(scrubPattern: ScrubPattern): string {
  const patternSource = scrubPattern.regex.source;
  return `${patternSource.includes("(?<keep>") ? "${keep}" : ""}[REDACTED:${scrubPattern.name}]${patternSource.includes("(?<tail>") ? "${tail}" : ""}`;
}

/** An OTTL string literal. */
const ottl = (text: string): string => `"${text.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;

export interface CollectorRedaction {
  traceStatements: Array<{ context: string; statements: string[] }>;
  blockedValues: string[];
}

export function collectorRedaction(patterns: readonly ScrubPattern[] = BUILTIN_PATTERNS): CollectorRedaction {
  const each = (target: string, fn: "replace_pattern" | "replace_all_patterns"): string[] =>
    patterns.map((scrubPattern) => {
      const args = [ottl(toRe2(scrubPattern.regex)), ottl(replacement(scrubPattern))].join(", ");
      return fn === "replace_pattern"
        ? `replace_pattern(${target}, ${args})`
        : `replace_all_patterns(${target}, "value", ${args})`;
    });
  const dropStack = 'delete_key(attributes, "exception.stacktrace")';
  return {
    traceStatements: [
      { context: "resource", statements: each("attributes", "replace_all_patterns") },
      {
        context: "span",
        statements: [
          dropStack,
          ...each("name", "replace_pattern"),
          ...each("status.message", "replace_pattern"),
          ...each("attributes", "replace_all_patterns"),
        ],
      },
      {
        context: "spanevent",
        statements: [dropStack, ...each("name", "replace_pattern"), ...each("attributes", "replace_all_patterns")],
      },
    ],
    blockedValues: patterns.map((p) => toRe2(p.regex)),
  };
}

/** collector.yaml with its redaction generated; everything else in the file is kept as written. */
export function generatedCollectorYaml(text: string): string {
  const doc = parseDocument(text);
  const scrubbing = collectorRedaction();
  doc.setIn(["processors", "transform/scrub", "trace_statements"], scrubbing.traceStatements);
  doc.setIn(["processors", "redaction", "blocked_values"], scrubbing.blockedValues);
  return doc.toString({ lineWidth: 0 });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(COLLECTOR_FILE, generatedCollectorYaml(readFileSync(COLLECTOR_FILE, "utf8")));
}
