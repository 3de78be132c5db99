// One stdout line → one ParsedLine. Never throws: a line we cannot read is still recorded with its
// exact raw text, so the event log keeps every byte and a newer parser can re-read it.
import { lineSchemas, type KnownLine, type SchemaKey } from "./schemas.ts";
import type { SplitItem } from "./split.ts";

export type LineCategory = "known" | "unknown" | "invalid" | "truncated";

interface ParsedBase {
  /** The exact line text (without its line ending). Empty for truncated lines. */
  raw: string;
  /** `type`, or `type/subtype` when the line has a string subtype. */
  type: string;
}
export interface KnownParsedLine extends ParsedBase {
  category: "known";
  line: KnownLine & Record<string, unknown>;
}
export interface UnknownParsedLine extends ParsedBase {
  category: "unknown";
  line: Record<string, unknown>;
  /** Set when the type is known but the shape did not match its schema. */
  issues?: string[];
}
export interface InvalidParsedLine extends ParsedBase {
  category: "invalid";
  type: "invalid";
  /** The parsed value when the text was JSON but not an object. */
  line?: unknown;
  error: string;
}
export interface TruncatedParsedLine extends ParsedBase {
  category: "truncated";
  type: "truncated";
  line?: undefined;
  byteLength: number;
  sha256: string;
}
export type ParsedLine = KnownParsedLine | UnknownParsedLine | InvalidParsedLine | TruncatedParsedLine;

/** Type key used when a JSON object has no string `type`. */
export const UNTYPED = "untyped";

const schemas = lineSchemas as Record<string, (typeof lineSchemas)[SchemaKey] | undefined>;

/**
 * One stdout line of the CLI, parsed: a known type checked against its schema, an unknown type kept and counted,
 * non-JSON kept as `invalid` with its raw text. Never throws.
 */
export function parseLine(raw: string): ParsedLine {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    return { category: "invalid", raw, type: "invalid", error: err instanceof Error ? err.message : String(err) };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return { category: "invalid", raw, type: "invalid", line: value, error: "line is JSON but not an object" };
  }
  const obj = value as Record<string, unknown>;
  const baseType = obj["type"];
  if (typeof baseType !== "string") return { category: "unknown", raw, type: UNTYPED, line: obj };
  const subtype = obj["subtype"];
  const type = typeof subtype === "string" ? `${baseType}/${subtype}` : baseType;
  // `system` lines are told apart by subtype; `result` shares one schema across its subtypes
  // (also future ones); the rest by type alone.
  const key = baseType === "system" ? type : baseType;
  const schema = schemas[key];
  if (schema === undefined) return { category: "unknown", raw, type, line: obj };
  const checked = schema.safeParse(obj);
  if (!checked.success) {
    const issues = checked.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`);
    return { category: "unknown", raw, type, line: obj, issues };
  }
  // Validate only: keep the original object so key order and every field survive untouched.
  return { category: "known", raw, type, line: obj as KnownParsedLine["line"] };
}

/** The record for a line the splitter cut because it was over the size limit: its length and sha256, not its text. */
export function truncatedLine(item: { truncated: true; byteLength: number; sha256: string }): TruncatedParsedLine {
  return { category: "truncated", raw: "", type: "truncated", byteLength: item.byteLength, sha256: item.sha256 };
}

/** Parses one splitter item. */
export function parseItem(item: SplitItem): ParsedLine {
  return "text" in item ? parseLine(item.text) : truncatedLine(item);
}

/** Parses a whole text (e.g. a fixture file): splits on newlines, skips blank lines. */
export function parseText(text: string): ParsedLine[] {
  const out: ParsedLine[] = [];
  for (let line of text.split("\n")) {
    if (line.endsWith("\r")) line = line.slice(0, -1);
    if (line.trim() === "") continue;
    out.push(parseLine(line));
  }
  return out;
}

/** Narrowing helper: the known line of a given type key, or undefined. */
export function isKnown(parsed: ParsedLine, type?: string): parsed is KnownParsedLine {
  return (
    parsed.category === "known" && (type === undefined || parsed.type === type || parsed.type.startsWith(type + "/"))
  );
}
