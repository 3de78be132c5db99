// The specifier half of a trust rule, in Claude Code's own permission-rule syntax
// (https://code.claude.com/docs/en/permissions), so an operator can write the rules they already know.
// Pure: every function here takes the specifier and the call's subject and answers match or not.
//  - shell commands: exact, legacy prefix `cmd:*`, or `*` wildcards anywhere (a trailing ` *` keeps a
//    word boundary and may match nothing); compound commands are split, see shellRuleMatches.
//  - file paths: gitignore semantics with `//abs`, `~/home`, `/project-root` and relative anchors.
//  - WebFetch: `domain:host`.
// `\*` and `\\` stand for a literal `*` and `\` everywhere (what escapeGlob writes).
import { posix } from "node:path";

const REGEX_SPECIAL = /[.*+?^${}()|[\]\\/]/g;
const literal = (c: string): string => c.replace(REGEX_SPECIAL, "\\$&");

type Token = { star: true } | { text: string };

/** Splits a specifier into literal characters and unescaped `*` tokens. */
function tokens(spec: string): Token[] {
  const out: Token[] = [];
  for (let index = 0; index < spec.length; index++) {
    const char = spec[index]!;
    if (char === "\\" && index + 1 < spec.length) out.push({ text: spec[++index]! });
    else if (char === "*") out.push({ star: true });
    else out.push({ text: char });
  }
  return out;
}

const hasWildcard = (spec: string): boolean => tokens(spec).some((t) => "star" in t);

// ---- shell commands ------------------------------------------------------------------------------

const LEGACY_PREFIX = /^([\s\S]*[^\\]):\*$/;

/**
 * The regex one shell rule stands for. `prefix:*` (legacy) is `prefix` alone or followed by a space
 * and anything, so `ls:*` matches `ls -la` but not `lsof`. Otherwise `*` is any run of characters;
 * when the pattern's only wildcard is a trailing ` *`, the space-and-rest is optional (`ls *` matches
 * `ls`), as the CLI does.
 */
function shellRuleRegex(spec: string): RegExp {
  const trimmed = spec.trim();
  const legacy = LEGACY_PREFIX.exec(trimmed);
  if (legacy !== null) return new RegExp(`^${shellBody(tokens(legacy[1]!.trimEnd()))}(?: [\\s\\S]*)?$`);
  const parts = tokens(trimmed);
  if (endsWithOnlyWildcardAfterSpace(parts)) return new RegExp(`^${shellBody(parts.slice(0, -2))}(?: [\\s\\S]*)?$`);
  return new RegExp(`^${shellBody(parts)}$`);
}

function endsWithOnlyWildcardAfterSpace(parts: readonly Token[]): boolean {
  const last = parts.at(-1);
  const beforeLast = parts.at(-2);
  const stars = parts.filter((t) => "star" in t).length;
  return (
    stars === 1 &&
    last !== undefined &&
    "star" in last &&
    beforeLast !== undefined &&
    "text" in beforeLast &&
    beforeLast.text === " "
  );
}

const shellBody = (parts: readonly Token[]): string =>
  parts.map((t) => ("star" in t ? "[\\s\\S]*" : literal(t.text))).join("");

// The CLI splits a command line on `&&`, `||`, `;`, `|` (and `&`, newlines) and needs every part
// allowed. Anything else that lets one line run more than its words say (substitutions, redirections,
// subshells, brace groups) we cannot split safely, so a line holding it is never allowed by a pattern.
const UNSPLITTABLE = /[<>`$(){}]/;
const LIST_OPERATORS = /\|\||&&|[;&|\n\r]/;
// For deny rules: also look inside substitutions and subshells, so `echo $(rm -rf x)` is caught.
const ANY_NESTING = /\|\||&&|[;&|\n\r]|\$\(|`|\(|\)/;

const splitOn = (command: string, separators: RegExp): string[] =>
  command
    .split(separators)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);

/**
 * Whether a shell rule matches a command line. An exact rule (no wildcard) matches the whole line as
 * written. Otherwise an allow needs every simple command of the line to match (`git status:*` does not
 * allow `git status && curl evil`), and a deny needs any one of them to.
 */
export function shellRuleMatches(spec: string, command: string, effect: "allow" | "deny"): boolean {
  const re = shellRuleRegex(spec);
  const whole = command.trim();
  if (effect === "deny") return re.test(whole) || splitOn(whole, ANY_NESTING).some((part) => re.test(part));
  // An exact rule is one line an operator read as a whole, so it may hold anything (`echo a > f`).
  if (!hasWildcard(spec) && re.test(whole)) return true;
  if (UNSPLITTABLE.test(whole)) return false;
  const parts = splitOn(whole, LIST_OPERATORS);
  // No parts (a line of bare separators) must not count as "every part allowed".
  return parts.length > 0 && parts.every((part) => re.test(part));
}

// ---- file paths ----------------------------------------------------------------------------------

export interface PathContext {
  /** The run's working directory: the project root (`/path`) and the current directory (`path`). */
  cwd: string | undefined;
  /** Home for `~/path`. */
  home: string;
}

interface AnchoredPattern {
  /** The directory the pattern is relative to; undefined when the call has none (no cwd). */
  base: string | undefined;
  pattern: string;
  /** A pattern without a `/` (but a trailing one) matches at any depth below its base, as in gitignore. */
  anyDepth: boolean;
}

/** `//abs`, `~/home`, `/root-relative`, `./relative` or `relative` → base directory and the rest. */
function anchor(spec: string, ctx: PathContext): AnchoredPattern {
  if (spec.startsWith("//")) return { base: "/", pattern: spec.slice(2), anyDepth: false };
  if (spec.startsWith("~/")) return { base: ctx.home, pattern: spec.slice(2), anyDepth: false };
  if (spec.startsWith("/")) return { base: ctx.cwd, pattern: spec.slice(1), anyDepth: false };
  if (spec.startsWith("./")) return { base: ctx.cwd, pattern: spec.slice(2), anyDepth: false };
  return { base: ctx.cwd, pattern: spec, anyDepth: !spec.replace(/\/+$/, "").includes("/") };
}

/** gitignore glob → regex over a `/`-separated relative path: `*` stays in one segment, `**` spans them. */
function pathGlobRegex(pattern: string, anyDepth: boolean): RegExp {
  const segments = pattern.split("/");
  let src = "";
  segments.forEach((segment, index) => {
    const last = index === segments.length - 1;
    if (segment === "**") src += last ? "[\\s\\S]*" : "(?:[^/]*/)*";
    else src += segmentRegex(segment) + (last ? "" : "/");
  });
  return new RegExp(`^${anyDepth ? "(?:[^/]*/)*" : ""}${src}$`);
}

const segmentRegex = (segment: string): string =>
  tokens(segment)
    .map((t) => ("star" in t ? "[^/]*" : literal(t.text)))
    .join("");

/** The path relative to `base`, `/`-separated; undefined when it is not below `base`. */
function below(base: string, path: string): string | undefined {
  const rel = posix.relative(base, path);
  if (rel === "" || rel === ".." || rel.startsWith("../") || posix.isAbsolute(rel)) return undefined;
  return rel;
}

/**
 * Whether a path rule matches a file. The file's path is made absolute against the cwd and normalized
 * first, so `src/../../etc/passwd` is not under `src`. As in gitignore, a pattern that matches one of
 * the file's directories matches the file too (`Edit(docs)` covers `docs/a.md`), and a trailing `/`
 * matches directories only.
 */
export function pathRuleMatches(spec: string, filePath: string, ctx: PathContext): boolean {
  const { base, pattern, anyDepth } = anchor(spec.trim(), ctx);
  const absolute = posix.isAbsolute(filePath)
    ? posix.normalize(filePath)
    : ctx.cwd === undefined
      ? undefined
      : posix.resolve(ctx.cwd, filePath);
  if (base === undefined || absolute === undefined) return false;
  const rel = below(base, absolute);
  if (rel === undefined) return false;
  const dirOnly = pattern.endsWith("/");
  const re = pathGlobRegex(pattern.replace(/\/+$/, ""), anyDepth);
  const parts = rel.split("/");
  for (let depth = 1; depth <= parts.length; depth++) {
    const isFile = depth === parts.length;
    if (isFile && dirOnly) continue;
    if (re.test(parts.slice(0, depth).join("/"))) return true;
  }
  return false;
}

// ---- WebFetch ------------------------------------------------------------------------------------

const DOMAIN_PREFIX = "domain:";

export const isDomainSpec = (spec: string): boolean => spec.startsWith(DOMAIN_PREFIX);

/**
 * `domain:example.com` matches a fetch whose URL's host is exactly that host (any scheme, port or
 * path). The docs say "fetch requests to example.com" and are silent about subdomains, so
 * `docs.example.com` does not match `domain:example.com`: exact host only, the narrower reading.
 */
export function domainRuleMatches(spec: string, url: string): boolean {
  const host = spec.slice(DOMAIN_PREFIX.length).trim().toLowerCase();
  try {
    return host.length > 0 && new URL(url).hostname.toLowerCase() === host;
  } catch {
    return false;
  }
}

/** A WebFetch specifier that is not `domain:` is a glob over the whole URL (`*` any run), as before. */
export function urlGlobMatches(spec: string, url: string): boolean {
  return new RegExp(`^${shellBody(tokens(spec))}$`).test(url);
}
