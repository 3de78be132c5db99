// Secrets in what a producer is given: a prompt, its variables or a literal env value shaped like a
// token is refused at enqueue with the shape named and the way to pass a secret (an env reference),
// before anything reaches Redis; prose that merely resembles a shape goes through.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createProducer, InvalidTurnError, parseOrThrow, turnJobSchema } from "../../src/queue/index.ts";
import { cleanupKeys, redisFor, testSpace } from "../worker/_support.ts";

const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const randomOf = (chars: string, n: number): string =>
  Array.from(randomBytes(n), (b) => chars[b % chars.length]).join("");
const githubToken = (): string => `ghp_${randomOf(ALNUM, 36)}`;
const awsKeyId = (): string => `AKIA${randomOf("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)}`;
const base64url = (json: string): string => Buffer.from(json).toString("base64url");
const jwt = (): string =>
  `${base64url('{"alg":"HS256"}')}.${base64url(`{"sub":"${randomOf(ALNUM, 8)}"}`)}.${randomOf(ALNUM, 32)}`;

async function keysUnder(redis: ReturnType<typeof redisFor>, pattern: string): Promise<string[]> {
  const out: string[] = [];
  let cursor = "0";
  do {
    const [next, batch] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 500);
    cursor = next;
    out.push(...batch);
  } while (cursor !== "0");
  return out;
}

test("enqueue refuses a prompt, variables, an appended system prompt or a literal env value shaped like a secret, and writes nothing", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({
    redis,
    logPrefix: space.logPrefix,
    queuePrefix: space.queuePrefix,
    allowEnv: ["DATABASE_URL"],
  });
  try {
    const cwd = space.workspace();
    const refused = async (
      input: Record<string, unknown>,
      field: string,
      shape: string,
      secret: string,
    ): Promise<void> => {
      const err = await producer.enqueueTurn({ cwd, ...input } as never).then(
        () => assert.fail(`accepted ${field}`),
        (e: unknown) => e,
      );
      assert.ok(err instanceof InvalidTurnError, String(err));
      assert.equal(err.field, field, err.message);
      assert.ok(err.message.includes(shape), err.message);
      assert.match(err.message, /fromEnv/);
      assert.ok(
        !err.message.includes(secret) && !err.issues.join("\n").includes(secret),
        "the error does not echo the secret",
      );
    };
    const gh = githubToken();
    await refused({ prompt: `push with ${gh} please` }, "prompt", "github_token", gh);
    const aws = awsKeyId();
    await refused(
      { prompt: "deploy with key {{creds.id}}", variables: { creds: { id: aws } } },
      "variables",
      "aws_access_key_id",
      aws,
    );
    const token = jwt();
    await refused(
      { prompt: "hi", options: { appendSystemPrompt: `session ${token}` } },
      "options.appendSystemPrompt",
      "jwt",
      token,
    );
    await refused({ prompt: "hi", options: { env: { MY_VALUE: gh } } }, "options.env.MY_VALUE", "github_token", gh);
    await refused(
      { prompt: "hi", options: { env: { DATABASE_URL: "postgres://u:s3cretpw@h/db" } } },
      "options.env.DATABASE_URL",
      "connection_password",
      "s3cretpw",
    );
    // BullMQ writes the queue's version record (`…:meta`) when the Queue is built, whatever is enqueued.
    const written = [
      ...(await keysUnder(redis, `${space.logPrefix}*`)),
      ...(await keysUnder(redis, `${space.queuePrefix}*`)),
    ];
    assert.deepEqual(
      written.filter((key) => !key.endsWith(":meta")),
      [],
    );
    assert.equal(await producer.queue.count(), 0);

    // Prose that looks a little like a shape, and a URL without a password, go through.
    const ok = await producer.enqueueTurn({
      prompt: "Add bearer authentication; docs at https://example.com/a@b",
      cwd,
      options: { env: { DATABASE_URL: "postgres://db.internal:5432/app" } },
    });
    assert.equal(ok.created, true);
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

test("a job written to Redis without a producer is refused by the worker's schema when an env value is shaped like a secret", () => {
  const job = {
    v: 1,
    session: "s1",
    turn: "t_abcdefgh12",
    prompt: "hi",
    cwd: "/tmp",
    options: { env: { PLAIN_NAME: awsKeyId() } },
    queuedSeq: 1,
    enqueuedAt: new Date().toISOString(),
  };
  assert.throws(
    () => parseOrThrow(turnJobSchema, job),
    (err: unknown) => err instanceof InvalidTurnError && err.field === "options.env.PLAIN_NAME",
  );
});
