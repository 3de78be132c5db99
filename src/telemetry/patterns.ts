// Secret shapes recognised without being told the value. Each pattern has a cheap literal pre-check
// (most text contains none of the anchors, so the real regex rarely runs) and optional named groups
// `keep` / `tail` that survive around the marker (the scheme and user of a URL, the word `Bearer`).
//
// Pre-checks start at their anchor's rarest character and confirm the rest with a lookaround
// (`J(?<=eyJ)` is "contains eyJ"): the regex engine skips ahead to candidate first characters, and
// `e`, `s` or `:` (which start `eyJ`, `sk-ant-`, `://`) are everywhere in JSON and prose, `J` is not.
// Each pre-check must be implied by its regex: a text the regex would match always passes it.

export interface ScrubPattern {
  /** Used in the marker: `[REDACTED:<name>]`. */
  readonly name: string;
  /** Must be non-global; true when the text could contain a match. */
  readonly precheck: RegExp;
  /** Must be global. Named groups `keep` (before) and `tail` (after) are kept verbatim. */
  readonly regex: RegExp;
}

export const BUILTIN_PATTERNS: readonly ScrubPattern[] = [
  {
    name: "private_key",
    precheck: /PRIVATE KEY/,
    // A truncated block (no END line) is still a key: redact to the end of the text.
    regex: /-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*$)/g,
  },
  {
    name: "anthropic_key",
    precheck: /-ant-(?<=sk-ant-)/,
    regex: /sk-ant-[A-Za-z0-9_-]{8,}/g,
  },
  {
    name: "github_token",
    precheck: /_(?<=gh[pousr]_)|github_pat_/,
    regex: /\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})/g,
  },
  {
    name: "aws_access_key_id",
    precheck: /[KS]IA(?<=A[KS]IA)/,
    regex: /\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g,
  },
  {
    name: "aws_secret_access_key",
    // the regex needs `access.?key`
    precheck: /k(?<=access.?k)/i,
    regex: /(?<keep>aws.?secret.?access.?key(?:\\*["'])?\s*[:=]\s*(?:\\*["'])?)[A-Za-z0-9/+=]{16,}/gi,
  },
  {
    name: "slack_token",
    precheck: /xox[abprs]-/,
    regex: /\bxox[abprs]-[A-Za-z0-9-]{10,}/g,
  },
  {
    name: "jwt",
    precheck: /J(?<=eyJ)/,
    regex: /\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g,
  },
  {
    name: "bearer_token",
    precheck: /b(?=earer\s)/i,
    regex: /(?<keep>\bbearer\s+)[A-Za-z0-9._~+/-]{8,}=*/gi,
  },
  {
    name: "basic_auth",
    // the regex needs `authorization`
    precheck: /z(?<=authoriz)/i,
    regex: /(?<keep>\bauthorization(?:\\*["'])?\s*[:=]\s*(?:\\*["'])?basic\s+)[A-Za-z0-9+/]{8,}=*/gi,
  },
  {
    name: "connection_password",
    precheck: /\/\/(?<=:\/\/)/,
    // `scheme://user:pass@host` keeps scheme, user and host; the last `@` before the path ends the
    // password, so `p@ss` is redacted whole. An empty user (`redis://:pw@host`) is common.
    regex: /(?<keep>\b[a-z][a-z0-9+.-]*:\/\/[^\s:@/"'\\]*:)(?!\[REDACTED:)[^\s/"'\\]+(?<tail>@)/gi,
  },
];

/**
 * A test that is true when any pattern's pre-check could match: one regex, case-insensitive
 * pre-checks inside `(?i:…)` groups, so clean text is scanned once. Pre-checks with flags other
 * than `i` keep their own regex.
 */
export function combinedPrecheck(patterns: readonly ScrubPattern[]): (text: string) => boolean {
  const parts: string[] = [];
  const own: RegExp[] = [];
  for (const p of patterns) {
    const flags = p.precheck.flags;
    if (flags === "") parts.push(`(?:${p.precheck.source})`);
    else if (flags === "i") parts.push(`(?i:${p.precheck.source})`);
    else own.push(p.precheck);
  }
  const one = parts.length === 0 ? null : new RegExp(parts.join("|"));
  if (own.length === 0) return one === null ? () => false : (text) => one.test(text);
  return (text) => (one !== null && one.test(text)) || own.some((r) => r.test(text));
}
