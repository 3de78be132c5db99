// Secret shapes recognised without being told the value. Each pattern has a cheap literal pre-check
// (most text contains none of the anchors, so the real regex rarely runs) and optional named groups
// `keep` / `tail` that survive around the marker (the scheme and user of a URL, the word `Bearer`).

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
    precheck: /sk-ant-/,
    regex: /sk-ant-[A-Za-z0-9_-]{8,}/g,
  },
  {
    name: "github_token",
    precheck: /gh[pousr]_|github_pat_/,
    regex: /\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})/g,
  },
  {
    name: "aws_access_key_id",
    precheck: /AKIA|ASIA/,
    regex: /\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g,
  },
  {
    name: "aws_secret_access_key",
    precheck: /aws.?secret.?access.?key/i,
    regex: /(?<keep>aws.?secret.?access.?key(?:\\*["'])?\s*[:=]\s*(?:\\*["'])?)[A-Za-z0-9/+=]{16,}/gi,
  },
  {
    name: "slack_token",
    precheck: /xox[abprs]-/,
    regex: /\bxox[abprs]-[A-Za-z0-9-]{10,}/g,
  },
  {
    name: "jwt",
    precheck: /eyJ/,
    regex: /\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g,
  },
  {
    name: "bearer_token",
    precheck: /bearer/i,
    regex: /(?<keep>\bbearer\s+)[A-Za-z0-9._~+/-]{8,}=*/gi,
  },
  {
    name: "basic_auth",
    precheck: /basic/i,
    regex: /(?<keep>\bauthorization(?:\\*["'])?\s*[:=]\s*(?:\\*["'])?basic\s+)[A-Za-z0-9+/]{8,}=*/gi,
  },
  {
    name: "connection_password",
    precheck: /:\/\//,
    // `scheme://user:pass@host` keeps scheme, user and host; the last `@` before the path ends the
    // password, so `p@ss` is redacted whole. An empty user (`redis://:pw@host`) is common.
    regex: /(?<keep>\b[a-z][a-z0-9+.-]*:\/\/[^\s:@/"'\\]*:)(?!\[REDACTED:)[^\s/"'\\]+(?<tail>@)/gi,
  },
];

/**
 * A test that is true when any pattern's pre-check could match. Case-sensitive and case-insensitive
 * pre-checks are combined separately: folding both into one regex (letters as classes) is 4x slower.
 */
export function combinedPrecheck(patterns: readonly ScrubPattern[]): (text: string) => boolean {
  const join = (ps: ScrubPattern[]): RegExp | null =>
    ps.length === 0 ? null : new RegExp(ps.map((p) => `(?:${p.precheck.source})`).join("|"), ps[0]!.precheck.flags.includes("i") ? "i" : "");
  const cs = join(patterns.filter((p) => !p.precheck.flags.includes("i")));
  const ci = join(patterns.filter((p) => p.precheck.flags.includes("i")));
  return (text) => (cs !== null && cs.test(text)) || (ci !== null && ci.test(text));
}
