// Small accessors shared by the folding, rendering and classification code.
import { isObj, type Obj } from "../kernel/index.ts";
import { parseLine, type ParsedLine } from "./parse.ts";

/** Functions over a run accept parsed lines or raw line texts. */
export type LinesInput = Iterable<ParsedLine | string>;

/** The lines parsed, whether given parsed or as raw texts. */
export function* parsedLines(lines: LinesInput): Generator<ParsedLine> {
  for (const line of lines) yield typeof line === "string" ? parseLine(line) : line;
}

/** The parsed object of a line, for known and unknown lines alike (a newer CLI's line still counts). */
export function objOf(parsed: ParsedLine): Obj | undefined {
  return (parsed.category === "known" || parsed.category === "unknown") && isObj(parsed.line)
    ? (parsed.line as Obj)
    : undefined;
}

/** The content blocks of an assistant or user line's message; a plain-text content reads as one text block. */
export function contentBlocks(line: Obj): Obj[] {
  const msg = line["message"];
  if (!isObj(msg)) return [];
  const content = msg["content"];
  if (typeof content === "string") return [{ type: "text", text: content }];
  return Array.isArray(content) ? content.filter(isObj) : [];
}

/** Text of a tool_result's content: a string, or text blocks joined; other blocks named by type. */
export function toolResultText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return content === undefined || content === null ? "" : JSON.stringify(content);
  const parts: string[] = [];
  for (const block of content) {
    if (isObj(block) && block["type"] === "text" && typeof block["text"] === "string") parts.push(block["text"]);
    else if (isObj(block) && typeof block["type"] === "string") parts.push(`[${block["type"]} block]`);
  }
  return parts.join("\n");
}

/** Keeps the start of a long text and says how much was dropped. */
export function capText(text: string, max: number): string {
  if (text.length <= max) return text;
  const dropped = text.length - max;
  return `${text.slice(0, max)}… [${dropped} more characters dropped]`;
}
