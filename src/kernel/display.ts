// Text shown to a person on a terminal or a page: anything a model, a tool or a Redis writer produced
// may carry control characters that a terminal obeys (ESC sequences that move the cursor, recolour,
// hide or rewrite what was printed; CR that overprints a line) or format characters that reorder or
// hide text (bidi overrides and isolates, zero-width characters). Each becomes a visible escape, so
// what an operator reads is the text as it is, byte for byte in meaning.

/**
 * Controls (C0, DEL, C1), format characters (bidi marks, overrides and isolates, zero-width ones, the
 * soft hyphen, BOM…) and the Unicode line and paragraph separators. A tab and a newline are listed too:
 * whether they are kept is the caller's choice (`multiline`).
 */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;

export interface DisplayOptions {
  /** Keep newlines (and tabs) as they are: a multi-line block such as a command or a transcript. Default false. */
  multiline?: boolean;
}

/** The visible escape of one unsafe character: `\x1b` below U+0100, `\u202e` above. */
function escapeOf(ch: string): string {
  const code = ch.codePointAt(0)!;
  if (code === 0x0a) return "\\n";
  if (code === 0x09) return "\\t";
  if (code === 0x0d) return "\\r";
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
}

/**
 * `text` safe to show a person: every control and invisible format character written as a visible
 * escape (`\x1b`, `\r`, `\u202e`…). With `multiline`, newlines and tabs stay; otherwise they are
 * escaped too, so one field is one line.
 */
export function forTerminal(text: string, options: DisplayOptions = {}): string {
  return text.replace(UNSAFE, (ch) => (options.multiline === true && (ch === "\n" || ch === "\t") ? ch : escapeOf(ch)));
}

export interface UnsafeCharacter {
  /** Its UTF-16 index in the text. */
  index: number;
  /** How forTerminal shows it (`\x1b`, `\u202e`). */
  escaped: string;
}

/** The first character `forTerminal` would escape (newlines and tabs allowed with `multiline`), or undefined. */
export function unsafeCharacter(text: string, options: DisplayOptions = {}): UnsafeCharacter | undefined {
  for (const match of text.matchAll(UNSAFE)) {
    const ch = match[0];
    if (options.multiline === true && (ch === "\n" || ch === "\t")) continue;
    return { index: match.index, escaped: escapeOf(ch) };
  }
  return undefined;
}
