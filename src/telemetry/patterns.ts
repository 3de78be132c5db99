// Secret shapes recognised without being told the value. Each pattern has a cheap literal pre-check
// (most text contains none of the anchors, so the real regex rarely runs) and optional named groups
// `keep` / `tail` that survive around the marker (the scheme and user of a URL, the word `Bearer`).
//
// Pre-checks start at their anchor's rarest character and confirm the rest with a lookaround
// (`J(?<=eyJ)` is "contains eyJ"): the regex engine skips ahead to candidate first characters, and
// `e`, `s` or `:` (which start `eyJ`, `sk-ant-`, `://`) are everywhere in JSON and prose, `J` is not.
// Each pre-check must be implied by its regex: a text the regex would match always passes it.

// The built-in patterns also scrub raw `cli.line` text, which must stay valid JSON: a match never
// starts or ends inside a JSON escape and never crosses an unescaped `"` (a private key's body may
// hold `\n` escapes and is read escape by escape), and the places where `\b` or `\s` would stand
// also accept what a JSON string shows there instead (`\n`, `\t`, `\u0001`), so a token on a new
// line of a tool result is found in the line as it is in the decoded text.

export interface ScrubPattern {
  /** Used in the marker: `[REDACTED:<name>]`. */
  readonly name: string;
  /** Must be non-global; true when the text could contain a match. */
  readonly precheck: RegExp;
  /** Must be global. Named groups `keep` (before) and `tail` (after) are kept verbatim. */
  readonly regex: RegExp;
  /**
   * Also matches ordinary prose (`bearer authentication`): redacted in output, where a false hit
   * costs a word, but never a reason to refuse input (secretShapeIn).
   */
  readonly matchesProse?: boolean;
}

// Where `\b` would stand before a token: no word character before it, or a JSON escape (`\n`, `\t`,
// `\u0001`) that the decoded text shows as a non-word character.
const START = String.raw`(?:(?<![A-Za-z0-9_])|(?<=\\[bfnrt]|\\u[0-9A-Fa-f]{4}))`;
// Whitespace, or a JSON string's escape for it.
const WS = String.raw`(?:\s|\\[nrtf]|\\u000[bB])`;
// One character of a JSON string's content, an escape counting as one: never an unescaped `"`.
const IN_STRING = String.raw`(?:[^"\\]|\\[\s\S])`;
const PEM_END = "-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----";

export const BUILTIN_PATTERNS: readonly ScrubPattern[] = [
  {
    name: "private_key",
    precheck: /PRIVATE KEY/,
    // A truncated block (no END line) is still a key: redact to the end of the text, or of the JSON
    // string it stands in.
    regex: new RegExp(
      String.raw`-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:${IN_STRING}*?${PEM_END}|${IN_STRING}*)`,
      "g",
    ),
  },
  {
    name: "anthropic_key",
    precheck: /-ant-(?<=sk-ant-)/,
    regex: /sk-ant-[A-Za-z0-9_-]{8,}/g,
  },
  {
    name: "github_token",
    precheck: /_(?<=gh[pousr]_)|github_pat_/,
    regex: new RegExp(String.raw`${START}(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`, "g"),
  },
  {
    name: "aws_access_key_id",
    precheck: /[KS]IA(?<=A[KS]IA)/,
    regex: new RegExp(String.raw`${START}(?:AKIA|ASIA)[A-Z0-9]{16}\b`, "g"),
  },
  {
    name: "aws_secret_access_key",
    // the regex needs `access.?key`
    precheck: /k(?<=access.?k)/i,
    regex: new RegExp(
      String.raw`(?<keep>aws.?secret.?access.?key(?:\\*["'])?${WS}*[:=]${WS}*(?:\\*["'])?)[A-Za-z0-9/+=]{16,}`,
      "gi",
    ),
  },
  {
    // The worker's own per-run tokens (the gateway's, the CLI telemetry receiver's): a tool can read
    // another run's from that CLI's environment, and that run's scrubber is the only one told its value.
    name: "turnstream_token",
    precheck: /m-(?=gw-|otlp-)(?<=turnstream-)/,
    regex: new RegExp(String.raw`${START}turnstream-(?:gw|otlp)-[A-Za-z0-9_-]{20,}`, "g"),
  },
  {
    name: "slack_token",
    precheck: /xox[abprs]-/,
    regex: new RegExp(String.raw`${START}xox[abprs]-[A-Za-z0-9-]{10,}`, "g"),
  },
  {
    name: "jwt",
    precheck: /J(?<=eyJ)/,
    regex: new RegExp(String.raw`${START}eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`, "g"),
  },
  {
    name: "bearer_token",
    precheck: new RegExp(String.raw`b(?=earer${WS})`, "i"),
    regex: new RegExp(String.raw`(?<keep>${START}bearer${WS}+)[A-Za-z0-9._~+/-]{8,}=*`, "gi"),
    matchesProse: true,
  },
  {
    name: "basic_auth",
    // the regex needs `authorization`
    precheck: /z(?<=authoriz)/i,
    regex: new RegExp(
      String.raw`(?<keep>${START}authorization(?:\\*["'])?${WS}*[:=]${WS}*(?:\\*["'])?basic${WS}+)[A-Za-z0-9+/]{8,}=*`,
      "gi",
    ),
  },
  {
    name: "connection_password",
    precheck: /\/\/(?<=:\/\/)/,
    // `scheme://user:pass@host` keeps scheme, user and host; the last `@` before the path ends the
    // password, so `p@ss` is redacted whole. An empty user (`redis://:pw@host`) is common. The scheme
    // is kept whatever it is, so it is taken as the whole run of scheme characters: `\f9postgres://`
    // in a JSON line then matches as `9postgres://` does in its decoded text, and each run is tried
    // once, not from each of its characters (a long base64 run would make that quadratic).
    regex: /(?<keep>(?<![a-z0-9+.-])[a-z0-9+.-]+:\/\/[^\s:@/"'\\]*:)(?!\[REDACTED:)[^\s/"'\\]+(?<tail>@)/gi,
  },
];

/** Regex modifiers (`(?i:…)`) arrived in V8 12.5: Node 24 has them, Node 22 does not. */
function hasRegexModifiers(): boolean {
  try {
    new RegExp("(?i:a)");
    return true;
  } catch {
    return false;
  }
}

const REGEX_MODIFIERS = hasRegexModifiers();

/**
 * A test that is true when any pattern's pre-check could match: one regex, case-insensitive
 * pre-checks inside `(?i:…)` groups, so clean text is scanned once. Pre-checks with flags other
 * than `i` (and, where the engine has no regex modifiers, the `i` ones too) keep their own regex.
 */
export function combinedPrecheck(patterns: readonly ScrubPattern[]): (text: string) => boolean {
  const parts: string[] = [];
  const own: RegExp[] = [];
  for (const pattern of patterns) {
    const flags = pattern.precheck.flags;
    if (flags === "") parts.push(`(?:${pattern.precheck.source})`);
    else if (flags === "i" && REGEX_MODIFIERS) parts.push(`(?i:${pattern.precheck.source})`);
    else own.push(pattern.precheck);
  }
  const one = parts.length === 0 ? null : new RegExp(parts.join("|"));
  if (own.length === 0) return one === null ? () => false : (text) => one.test(text);
  return (text) => (one !== null && one.test(text)) || own.some((r) => r.test(text));
}

// Shapes that ordinary prose never takes: any of them in a prompt or an env value is a secret.
const REFUSABLE = BUILTIN_PATTERNS.filter((p) => p.matchesProse !== true);
const anyRefusable = combinedPrecheck(REFUSABLE);

/** The name of the first built-in secret shape found in `text` (prose look-alikes left out), or undefined. */
export function secretShapeIn(text: string): string | undefined {
  if (!anyRefusable(text)) return undefined;
  // search() ignores and restores lastIndex, so the shared global regexes stay as they were.
  return REFUSABLE.find((p) => p.precheck.test(text) && text.search(p.regex) !== -1)?.name;
}
