// Small accessors shared by the folding, rendering and classification code.
import { isObj, type Obj } from "../kernel/index.ts";
import { parseLine, type ParsedLine } from "./parse.ts";

/** Functions over a run accept parsed lines or raw line texts. */
export type LinesInput = Iterable<ParsedLine | string>;

/** The lines parsed, whether given parsed or as raw texts. */
export function* parsedLines(lines: LinesInput): Generator<ParsedLine> {
  for (const l of lines) yield typeof l === "string" ? parseLine(l) : l;
}

/** The parsed object of a line, for known and unknown lines alike (a newer CLI's line still counts). */
export function objOf(p: ParsedLine): Obj | undefined {
  return (p.category === "known" || p.category === "unknown") && isObj(p.line) ? (p.line as Obj) : undefined;
}

export function contentBlocks(o: Obj): Obj[] {
  const msg = o["message"];
  if (!isObj(msg)) return [];
  const c = msg["content"];
  if (typeof c === "string") return [{ type: "text", text: c }];
  return Array.isArray(c) ? c.filter(isObj) : [];
}

/** Text of a tool_result's content: a string, or text blocks joined; other blocks named by type. */
export function toolResultText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return content === undefined || content === null ? "" : JSON.stringify(content);
  const parts: string[] = [];
  for (const b of content) {
    if (isObj(b) && b["type"] === "text" && typeof b["text"] === "string") parts.push(b["text"]);
    else if (isObj(b) && typeof b["type"] === "string") parts.push(`[${b["type"]} block]`);
  }
  return parts.join("\n");
}

/** Keeps the start of a long text and says how much was dropped. */
export function capText(text: string, max: number): string {
  if (text.length <= max) return text;
  const dropped = text.length - max;
  return `${text.slice(0, max)}… [${dropped} more characters dropped]`;
}
