import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createScrubber,
  isSecretEnvName,
  isSecretFieldName,
  scrubError,
  ScrubberConfigError,
} from "../../src/telemetry/scrub.ts";
import { secretShapeIn } from "../../src/telemetry/patterns.ts";

test("env names: secret words count, metadata words and look-alikes do not", () => {
  for (const name of [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "DB_PASSWORD",
    "MYSQL_PASSWD",
    "GITHUB_TOKEN",
    "NPM_AUTH",
    "SESSION_COOKIE",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "SENTRY_DSN",
    "STRIPE_KEY",
    "githubToken",
    "DB_PWD",
  ])
    assert.equal(isSecretEnvName(name), true, name);
  for (const name of [
    "PWD",
    "OLDPWD",
    "HOME",
    "PATH",
    "GIT_AUTHOR_NAME",
    "CLAUDE_CODE_SESSION_ID",
    "KEY_FILE",
    "MAX_TOKENS",
    "TOKEN_TTL",
    "KEYBOARD_LAYOUT",
    "REDIS_URL",
    "OTEL_SERVICE_NAME",
  ])
    assert.equal(isSecretEnvName(name), false, name);
});

test("field names: api keys and tokens, never cache keys, session ids or token counts", () => {
  for (const name of [
    "apiKey",
    "x-api-key",
    "authorization",
    "accessToken",
    "refresh_token",
    "password",
    "client_secret",
    "proxy.auth",
  ]) {
    assert.equal(isSecretFieldName(name), true, name);
  }
  for (const name of [
    "key",
    "cacheKey",
    "stream_key",
    "session",
    "sessionId",
    "input_tokens",
    "tokenCount",
    "turnstream.session",
    "author",
  ]) {
    assert.equal(isSecretFieldName(name), false, name);
  }
});

test("env values are redacted by variable name; short and boring values are left alone", () => {
  const scrubber = createScrubber({
    env: {
      MY_API_KEY: "abcd1234efgh",
      SHORT_TOKEN: "abc",
      FEATURE_AUTH: "true",
      PWD: "/srv/project-dir",
      HOME: "/root",
    },
  });
  assert.equal(scrubber.scrub("key=abcd1234efgh in /srv/project-dir"), "key=[REDACTED:MY_API_KEY] in /srv/project-dir");
  assert.equal(scrubber.scrub("abc true"), "abc true");
  assert.equal(scrubber.size, 1);
});

test("passwords inside URL values and OTLP header values are known secrets whatever the name", () => {
  const scrubber = createScrubber({
    env: {
      REDIS_URL: "redis://worker:s3cr%40tpass@redis:6379/0",
      OTEL_EXPORTER_OTLP_HEADERS: "x-honeycomb-team=hc-abcdef123456,dataset=prod",
    },
  });
  assert.equal(
    scrubber.scrub("tried s3cr@tpass and s3cr%40tpass"),
    "tried [REDACTED:REDIS_URL] and [REDACTED:REDIS_URL]",
  );
  assert.equal(scrubber.scrub("team hc-abcdef123456"), "team [REDACTED:OTEL_EXPORTER_OTLP_HEADERS]");
  assert.equal(scrubber.scrub("dataset prod"), "dataset prod");
});

test("a value contained in another: the longer one wins, no tail of either leaks", () => {
  const scrubber = createScrubber({ values: { OUTER: "prefix-inner-secret-suffix", INNER: "inner-secret" } });
  assert.equal(
    scrubber.scrub("a prefix-inner-secret-suffix b inner-secret c"),
    "a [REDACTED:OUTER] b [REDACTED:INNER] c",
  );
});

test("overlapping values are redacted as one union, leaving no fragment", () => {
  const scrubber = createScrubber({ values: { A: "xx12345678", B: "12345678yyyyyyyy" } });
  const out = scrubber.scrub("<xx12345678yyyyyyyy>");
  assert.equal(out, "<[REDACTED:A]>");
  assert.ok(!out.includes("yyyy") && !out.includes("1234"));
});

test("values with regex metacharacters, unicode and astral characters", () => {
  const meta = "a.b*c+(d)[e]{f}|g^h$\\i/j-k?";
  const uni = "pässwörd-ünï🔑-日本語";
  const scrubber = createScrubber({ values: { META: meta, UNI: uni } });
  assert.equal(scrubber.scrub(`x ${meta} y ${uni} z`), "x [REDACTED:META] y [REDACTED:UNI] z");
  assert.equal(
    scrubber.scrub("a.b*c+(d)[e]{f}|g^h$\\i/j-k"),
    "a.b*c+(d)[e]{f}|g^h$\\i/j-k",
    "a near miss is not a match",
  );
});

test("secrets in JSON-escaped, doubly escaped, \\u-escaped and URL-encoded form are caught", () => {
  const secret = 'pa"ss\\wörd/\n\tend';
  const scrubber = createScrubber({ values: { DB_PASSWORD: secret } });
  const once = JSON.stringify({ text: `before ${secret} after` });
  const twice = JSON.stringify({ content: once });
  const python = once.replace(/[\u0080-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  const slashes = once.replaceAll("/", "\\/");
  for (const text of [once, twice, python, slashes]) {
    const out = scrubber.scrub(text);
    assert.match(out, /\[REDACTED:DB_PASSWORD\]/, text);
    assert.ok(!out.includes('pa\\"ss') && !out.includes("w\\u00f6rd") && !out.includes("wörd"), out);
  }
  assert.equal(JSON.parse(scrubber.scrub(once)).text, "before [REDACTED:DB_PASSWORD] after");
  assert.equal(scrubber.scrub(`?p=${encodeURIComponent(secret)}`), "?p=[REDACTED:DB_PASSWORD]");
});

test("built-in patterns redact each secret shape and keep the surrounding words", () => {
  const scrubber = createScrubber();
  const cases: Array<[string, string]> = [
    ["key sk-ant-api03-Abc_def-0123456789xyz end", "key [REDACTED:anthropic_key] end"],
    ["Authorization: Bearer abc.DEF-123_456~+/xyz=", "Authorization: Bearer [REDACTED:bearer_token]"],
    ['{"authorization":"Basic dXNlcjpwYXNzd29yZA=="}', '{"authorization":"Basic [REDACTED:basic_auth]"}'],
    ["t=ghp_abcdefghijklmnopqrstuvwxyz0123456789", "t=[REDACTED:github_token]"],
    ["t=github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "t=[REDACTED:github_token]"],
    ["id AKIAIOSFODNN7EXAMPLE ok", "id [REDACTED:aws_access_key_id] ok"],
    [
      "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
      "aws_secret_access_key = [REDACTED:aws_secret_access_key]",
    ],
    [
      '{\\"AWS_SECRET_ACCESS_KEY\\":\\"wJalrXUtnFEMI/K7MDENG/bPxRfiCY\\"}',
      '{\\"AWS_SECRET_ACCESS_KEY\\":\\"[REDACTED:aws_secret_access_key]\\"}',
    ],
    ["slack xoxb-123456789012-abcdefghijkl", "slack [REDACTED:slack_token]"],
    [
      "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U!",
      "jwt [REDACTED:jwt]!",
    ],
    [
      "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY----- tail",
      "[REDACTED:private_key] tail",
    ],
    [
      "-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXk\\n-----END OPENSSH PRIVATE KEY-----",
      "[REDACTED:private_key]",
    ],
    ["truncated -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq", "truncated [REDACTED:private_key]"],
    [
      "postgres://bob:p@ss:w0rd@db.example.com:5432/app",
      "postgres://bob:[REDACTED:connection_password]@db.example.com:5432/app",
    ],
    ["redis://:hunter2@redis:6379", "redis://:[REDACTED:connection_password]@redis:6379"],
  ];
  for (const [input, expected] of cases) assert.equal(scrubber.scrub(input), expected, input);
});

test("a token after a JSON escape (a tool result's new line) is found in the raw line as in the decoded text", () => {
  const scrubber = createScrubber();
  const gh = "ghp_" + "aB3".repeat(12);
  const aws = "AKIA" + "Q7ZK".repeat(4);
  const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlLWJ5dGVz";
  for (const text of [`lines:\n${gh}\n${aws}\t${jwt}`, `\u0001${gh}`, `Authorization:\nBearer\n${"tok3n".repeat(3)}`]) {
    const line = JSON.stringify({ type: "user", content: text });
    const out = scrubber.scrub(line);
    assert.deepEqual(JSON.parse(out), { type: "user", content: scrubber.scrub(text) });
    for (const secret of [gh, aws, jwt, "tok3n".repeat(3)]) assert.ok(!out.includes(secret), out);
  }
});

test("a private key inside a JSON string is redacted to its END line or its string's end, never past the closing quote", () => {
  const scrubber = createScrubber();
  const key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nAAAA";
  const line = JSON.stringify({ a: key, b: "after", c: `${key}\n-----END PRIVATE KEY-----\nok` });
  assert.deepEqual(JSON.parse(scrubber.scrub(line)), {
    a: "[REDACTED:private_key]",
    b: "after",
    c: "[REDACTED:private_key]\nok",
  });
});

test("secretShapeIn names the shape of a secret and ignores prose look-alikes", () => {
  assert.equal(secretShapeIn(`use ghp_${"x1".repeat(18)} please`), "github_token");
  assert.equal(secretShapeIn("postgres://u:secret@h/db"), "connection_password");
  assert.equal(secretShapeIn("AKIAIOSFODNN7EXAMPLE"), "aws_access_key_id");
  for (const prose of [
    "Add bearer authentication to the API",
    "the bearer of bad news",
    "see https://example.com/a@b",
    "ghp_ is GitHub's prefix",
    "",
  ]) {
    assert.equal(secretShapeIn(prose), undefined, prose);
  }
});

test("ordinary text survives the patterns", () => {
  const scrubber = createScrubber();
  for (const text of [
    "The bearer of bad news arrived; basic facts only.",
    "See https://example.com/a/b?x=1 and http://host:8080/path@v2 for details",
    "ASIAN markets, AKIA is a word, sk-ant is a prefix, eyJ alone",
    '{"type":"result","subtype":"success","usage":{"input_tokens":12}}',
    "git@github.com:owner/repo.git",
  ])
    assert.equal(scrubber.scrub(text), text);
});

test("credential file: token fields at any depth, absent file is 0, malformed file still scanned", () => {
  const dir = mkdtempSync(join(tmpdir(), "ts-cred-"));
  try {
    const path = join(dir, ".credentials.json");
    writeFileSync(
      path,
      JSON.stringify({
        claudeAiOauth: {
          accessToken: "sk-ant-oat01-ACCESSxyz",
          refreshToken: "rt-REFRESH-0123456789",
          expiresAt: 1767225600000,
          scopes: ["user:inference"],
        },
        other: { deeper: [{ id_token: "idtok-abcdefgh" }] },
      }),
    );
    const scrubber = createScrubber({ patterns: false });
    assert.equal(scrubber.addCredentialFile(path), 3);
    assert.equal(
      scrubber.scrub("a sk-ant-oat01-ACCESSxyz b rt-REFRESH-0123456789 c idtok-abcdefgh user:inference"),
      "a [REDACTED:accessToken] b [REDACTED:refreshToken] c [REDACTED:id_token] user:inference",
    );
    assert.equal(scrubber.addCredentialFile(join(dir, "missing.json")), 0);
    const broken = join(dir, "broken.json");
    writeFileSync(broken, '{"claudeAiOauth":{"accessToken":"half-written-tok\\"en","refreshToken":"rt-trunc');
    const brokenScrubber = createScrubber({ patterns: false });
    assert.equal(brokenScrubber.addCredentialFile(broken), 1);
    assert.equal(brokenScrubber.scrub('x half-written-tok"en'), "x [REDACTED:accessToken]");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("child scrubbers: a run's overlay stays in the run, the parent's later secrets reach the child", () => {
  const worker = createScrubber({ env: { WORKER_TOKEN: "worker-token-123" } });
  const run = worker.child({ ANTHROPIC_API_KEY: "run-api-key-456", CLAUDE_CONFIG_DIR: "/tmp/run-config" });
  assert.equal(
    run.scrub("worker-token-123 run-api-key-456 /tmp/run-config"),
    "[REDACTED:WORKER_TOKEN] [REDACTED:ANTHROPIC_API_KEY] /tmp/run-config",
  );
  assert.equal(worker.scrub("run-api-key-456"), "run-api-key-456");
  worker.addValue("late", "registered-later-789");
  assert.equal(run.scrub("registered-later-789"), "[REDACTED:late]");
  const more = run.withValues({ user_secret: "user-secret-000" });
  assert.equal(more.scrub("user-secret-000 run-api-key-456"), "[REDACTED:user_secret] [REDACTED:ANTHROPIC_API_KEY]");
  assert.equal(run.scrub("user-secret-000"), "user-secret-000");
  // A run whose overlay holds no secret scrubs as its parent does, later values included, until it
  // learns one of its own.
  const plain = worker.child({ CLAUDE_CONFIG_DIR: "/tmp/run-config" });
  assert.equal(plain.scrub("worker-token-123 registered-later-789"), "[REDACTED:WORKER_TOKEN] [REDACTED:late]");
  worker.addValue("later", "registered-even-later-1");
  assert.equal(plain.scrub("registered-even-later-1"), "[REDACTED:later]");
  plain.addValue("own", "plain-own-secret-2");
  assert.equal(plain.scrub("plain-own-secret-2 worker-token-123"), "[REDACTED:own] [REDACTED:WORKER_TOKEN]");
  assert.equal(worker.scrub("plain-own-secret-2"), "plain-own-secret-2");
});

test("registered values too short to redact are refused without echoing them", () => {
  const scrubber = createScrubber();
  assert.throws(
    () => scrubber.addValue("pin", "abc"),
    (err: unknown) => {
      assert.ok(err instanceof ScrubberConfigError);
      assert.equal(err.secretName, "pin");
      assert.ok(!err.message.includes("abc"));
      return true;
    },
  );
});

test("the hook runs last, on scrubbed text, with the caller's context", () => {
  const seen: Array<[string, string | undefined]> = [];
  const scrubber = createScrubber({
    values: { K: "known-value-1" },
    hook: (text, ctx) => {
      seen.push([text, ctx.sink]);
      return text.replace(/customer-\d+/g, "[REDACTED:customer]");
    },
  });
  assert.equal(scrubber.scrub("known-value-1 customer-42", { sink: "log" }), "[REDACTED:K] [REDACTED:customer]");
  assert.deepEqual(seen, [["[REDACTED:K] customer-42", "log"]]);
  const child = scrubber.child({}, { hook: (t) => t.toUpperCase() });
  assert.equal(child.scrub("customer-7 x"), "[REDACTED:CUSTOMER] X");
});

test("scrubDeep copies structure, redacts secret-named fields whole, handles cycles", () => {
  const scrubber = createScrubber({ values: { TOK: "deep-value-1" } });
  const input: Record<string, unknown> = {
    msg: "has deep-value-1",
    list: ["deep-value-1", 5, null, { nested: "x deep-value-1" }],
    headers: { authorization: "short", "x-api-key": "k", accept: "json" },
    map: new Map([["deep-value-1", "v deep-value-1"]]),
    at: new Date(0),
    usage: { input_tokens: 3 },
  };
  input["self"] = input;
  const out = scrubber.scrubDeep(input) as Record<string, any>;
  assert.equal(out["msg"], "has [REDACTED:TOK]");
  assert.deepEqual(out["list"].slice(0, 3), ["[REDACTED:TOK]", 5, null]);
  assert.equal(out["list"][3].nested, "x [REDACTED:TOK]");
  assert.deepEqual(out["headers"], {
    authorization: "[REDACTED:authorization]",
    "x-api-key": "[REDACTED:x-api-key]",
    accept: "json",
  });
  assert.deepEqual([...out["map"]], [["[REDACTED:TOK]", "v [REDACTED:TOK]"]]);
  assert.equal(out["self"], out);
  assert.deepEqual(out["usage"], { input_tokens: 3 });
  assert.equal(input["msg"], "has deep-value-1", "input not mutated");
});

class RunError extends Error {
  readonly kind = "cli_failed";
  readonly exitCode: number;
  declare readonly stderr: string;
  constructor(message: string, stderr: string) {
    super(message, { cause: new Error("inner deep-secret-2") });
    this.name = "RunError";
    this.exitCode = 3;
    Object.defineProperty(this, "stderr", { value: stderr, enumerable: false });
  }
}

test("scrubError keeps class, name and kind; scrubs message, stack, fields, hidden stderr and cause", () => {
  const scrubber = createScrubber({ values: { TOK: "deep-secret-2" } });
  const err = Object.assign(new RunError("run failed with deep-secret-2", "stderr: deep-secret-2"), {
    detail: "detail deep-secret-2",
  });
  const safe = scrubError(err, scrubber);
  assert.ok(safe instanceof RunError && safe instanceof Error);
  assert.notEqual(safe, err);
  assert.equal(safe.name, "RunError");
  assert.equal(safe.kind, "cli_failed");
  assert.equal(safe.exitCode, 3);
  assert.equal(safe.message, "run failed with [REDACTED:TOK]");
  assert.ok(!safe.stack!.includes("deep-secret-2"));
  assert.equal(safe.stderr, "stderr: [REDACTED:TOK]");
  assert.equal(Object.keys(safe).includes("stderr"), false, "stays non-enumerable");
  assert.equal((safe as RunError & { detail?: unknown }).detail, "detail [REDACTED:TOK]");
  assert.equal((safe.cause as Error).message, "inner [REDACTED:TOK]");
  assert.ok(!JSON.stringify(safe).includes("deep-secret-2"));
  assert.equal(err.message, "run failed with deep-secret-2", "original untouched");
  assert.equal(scrubError("thrown string deep-secret-2", scrubber).message, "thrown string [REDACTED:TOK]");
});
