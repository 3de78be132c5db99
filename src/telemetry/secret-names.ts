// Which names (environment variables, object keys, span attribute keys) hold secrets. Names are split
// into words (on `_ - . /` and camelCase) so `GIT_AUTHOR_NAME` is not AUTH and `PWD` is not a password.

/** Words that make any name secret. */
const STRONG = new Set([
  "TOKEN",
  "SECRET",
  "SECRETS",
  "PASSWORD",
  "PASSWORDS",
  "PASSWD",
  "PASSPHRASE",
  "CREDENTIAL",
  "CREDENTIALS",
  "COOKIE",
  "COOKIES",
  "AUTHORIZATION",
  "APIKEY",
  "BEARER",
  "JWT",
  "PRIVATEKEY",
  "ACCESSKEY",
  "SECRETKEY",
  "SIGNINGKEY",
  "MASTERKEY",
  "ENCRYPTIONKEY",
  "CLIENTSECRET",
]);
const STRONG_SUFFIXES = ["TOKEN", "SECRET", "PASSWORD", "PASSWD"];

/** Words that make an environment variable secret (env names are conventionally precise). */
const ENV_WEAK = new Set(["KEY", "AUTH", "SESSION", "PASS", "PWD", "DSN", "SIGNATURE"]);

/** In object keys, KEY is secret only after one of these (`api_key`, `x-api-key`), never `cache_key`. */
const KEY_QUALIFIERS = new Set([
  "API",
  "ACCESS",
  "SECRET",
  "PRIVATE",
  "SIGNING",
  "MASTER",
  "ENCRYPTION",
  "AUTH",
  "SSH",
  "LICENSE",
  "CLIENT",
]);

/** A last word that describes a secret rather than holding one: `SESSION_ID`, `KEY_FILE`, `tokenCount`. */
const METADATA = new Set([
  "ID",
  "IDS",
  "NAME",
  "NAMES",
  "FILE",
  "PATH",
  "DIR",
  "TYPE",
  "KIND",
  "COUNT",
  "COUNTS",
  "SIZE",
  "LENGTH",
  "TTL",
  "TIMEOUT",
  "EXPIRY",
  "EXPIRES",
  "AT",
  "LIMIT",
  "ENABLED",
  "DISABLED",
  "MODE",
  "LEVEL",
  "PREFIX",
  "FORMAT",
  "VERSION",
  "SOURCE",
  "STATUS",
  "HELPER",
  "SCOPES",
  "SCOPE",
]);

/** Variables that look secret by word but are not (`PWD` is the working directory). */
const NOT_SECRET_ENV = new Set(["PWD", "OLDPWD"]);

export function nameWords(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .split(/[^A-Za-z0-9]+/)
    .filter((w) => w !== "")
    .map((w) => w.toUpperCase());
}

function strong(words: string[]): boolean {
  return words.some((w) => STRONG.has(w) || STRONG_SUFFIXES.some((s) => w.length > s.length && w.endsWith(s)));
}

/** True when an environment variable's value should be treated as a secret. */
export function isSecretEnvName(name: string): boolean {
  if (NOT_SECRET_ENV.has(name.toUpperCase())) return false;
  const words = nameWords(name);
  if (words.length === 0 || METADATA.has(words.at(-1)!)) return false;
  return strong(words) || words.some((w) => ENV_WEAK.has(w));
}

/** True when an object field or attribute key holds a secret (`apiKey`, `authorization`, `password`). */
export function isSecretFieldName(name: string): boolean {
  const words = nameWords(name);
  if (words.length === 0) return false;
  const last = words.at(-1)!;
  if (METADATA.has(last)) return false;
  if (strong(words)) return true;
  if (last === "AUTH" || last === "PASS" || last === "PWD") return true;
  for (let index = 1; index < words.length; index++) {
    if (words[index] === "KEY" && KEY_QUALIFIERS.has(words[index - 1]!)) return true;
  }
  return false;
}
