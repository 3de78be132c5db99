// Canary secrets through a worker and the real CLI: distinct secrets planted in the worker's
// environment, in a job's env overlay (by reference, under a secret name and under a plain one), in
// the CLI's stderr (a wrapper around the CLI prints one), in a Bash tool's output, in the command the
// model asks Bash to run, in an API error message from the model server, and in an error thrown by an
// event observer. Spans go over OTLP/HTTP (json) to a real receiver on loopback. Afterwards every
// OTLP request body, every worker log line, every Redis key under the queue and log prefixes, every
// event-log entry and the session files the snapshots hold (decoded) must hold no canary, while the
// same spans still name the tool and the error kind.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { chmodSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  ATTEMPT_SPAN_NAME,
  createLogger,
  createScrubber,
  GENAI,
  redactionMarker,
  startTelemetry,
  toolSpanName,
} from "../../src/telemetry/index.ts";
import type { Envelope, RedisClient } from "../../src/log/index.ts";
import { startOtlpReceiver } from "../telemetry/otlp-receiver.ts";
import { dataOf, rig } from "../worker/_more.ts";

const canary = (what: string): string => `cnry${what}${randomBytes(8).toString("hex")}`;

/**
 * Every value under `pattern`, as text; stream entries of session snapshots (and their blobs) left
 * out: they hold the session file base64-encoded, and are checked decoded (snapshotFiles).
 */
async function dumpKeys(redis: RedisClient, pattern: string): Promise<Map<string, string>> {
  const keys: string[] = [];
  let cursor = "0";
  do {
    const [next, batch] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 500);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== "0");
  const out = new Map<string, string>();
  const snapshotBlobs = new Set<string>();
  const later: string[] = [];
  for (const key of keys) {
    const type = await redis.type(key);
    if (type === "string") later.push(key);
    else if (type === "hash") out.set(key, JSON.stringify(await redis.hgetall(key)));
    else if (type === "list") out.set(key, JSON.stringify(await redis.lrange(key, 0, -1)));
    else if (type === "set") out.set(key, JSON.stringify(await redis.smembers(key)));
    else if (type === "zset") out.set(key, JSON.stringify(await redis.zrange(key, 0, -1, "WITHSCORES")));
    else if (type === "stream") {
      const kept: unknown[] = [];
      for (const [id, fields] of await redis.xrange(key, "-", "+")) {
        const encoded = fields[fields.indexOf("e") + 1] ?? "";
        let rec: { kind?: string; b?: { s?: string } } = {};
        try {
          rec = JSON.parse(encoded) as typeof rec;
        } catch {
          // kept whole below
        }
        if (rec.kind === "session.snapshot") {
          if (rec.b?.s !== undefined) snapshotBlobs.add(rec.b.s);
          continue;
        }
        kept.push([id, fields]);
      }
      out.set(key, JSON.stringify(kept));
    } else out.set(key, `<${type}>`);
  }
  for (const key of later) {
    if ([...snapshotBlobs].some((s) => key.endsWith(`:blob:${s}`))) continue;
    out.set(key, (await redis.get(key)) ?? "");
  }
  return out;
}

/** The session file bytes every snapshot event of `events` holds (whole or appended), decoded. */
function snapshotFiles(events: Envelope[]): string[] {
  return events
    .filter((e) => e.kind === "session.snapshot")
    .map((e) => Buffer.from(String(dataOf(e)["base64"]), "base64").toString("utf8"));
}

test("canaries: no planted secret reaches OTLP, logs, BullMQ or the event log; spans keep tool names and error kinds", async () => {
  const canaries = {
    deploy: canary("deploy"),
    greeting: canary("greet"),
    stderr: canary("stderr"),
    api: canary("api"),
    registered: canary("reg"),
  };
  const secretEnv = {
    DEPLOY_TOKEN: canaries.deploy,
    WORKER_GREETING: canaries.greeting, // not secret by name: secret because a job references it
    STDERR_NOTE_TOKEN: canaries.stderr,
    API_SIGNING_SECRET: canaries.api,
  };
  const setup = await rig(
    {
      responses: [
        {
          content: [
            {
              type: "tool_use",
              name: "Bash",
              input: {
                command: `echo "deploy=$DEPLOY_TOKEN greet=$GREETING"; echo ${canaries.registered}`,
                description: "print the secrets",
              },
            },
          ],
        },
        { content: [{ type: "text", text: "printed" }] },
        {
          error: { status: 403, type: "permission_error", message: `request signature ${canaries.api} does not match` },
        },
      ],
    },
    { allowEnv: ["DEPLOY_TOKEN", "GREETING", "WRAPPER_TOKEN"] },
  );
  const receiver = await startOtlpReceiver();
  const logLines: string[] = [];
  const scrubber = createScrubber();
  const logger = createLogger({
    scrubber,
    level: "debug",
    destination: { write: (l: string) => void logLines.push(l) },
  });
  const telemetry = startTelemetry({
    scrubber,
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" },
  });
  // A wrapper around the real CLI that prints a secret from its environment to stderr.
  const wrapper = join(setup.space.dir("bin"), "claude-wrapper");
  writeFileSync(
    wrapper,
    `#!/bin/sh\nprintf 'wrapper note: token=%s\\n' "$WRAPPER_TOKEN" >&2\nexec ${realpathSync("node_modules/.bin/claude")} "$@"\n`,
  );
  chmodSync(wrapper, 0o755);
  let thrown = 0;
  try {
    const worker = setup.worker({
      logger,
      scrubber,
      telemetry,
      secretEnv,
      secretValues: { TEST_REGISTERED: canaries.registered },
      claudeBin: wrapper,
      sandboxed: true,
      observers: [
        {
          attempt: () => ({
            onEvent() {
              if (thrown++ === 0)
                throw new Error(`observer could not use ${canaries.registered} with ${canaries.deploy}`);
            },
          }),
        },
      ],
    });
    const env = {
      DEPLOY_TOKEN: { fromEnv: "DEPLOY_TOKEN" },
      GREETING: { fromEnv: "WORKER_GREETING" },
      WRAPPER_TOKEN: { fromEnv: "STDERR_NOTE_TOKEN" },
    };
    const t1 = await setup.producer.enqueueTurn({
      prompt: "print them",
      cwd: setup.ws,
      options: { skipPermissions: true, env },
    });
    const r1 = await setup.producer.waitForTurn(t1.turn, { timeoutMs: 60_000 });
    assert.equal(r1.status, "finished", JSON.stringify(r1.event.data));
    const t2 = await setup.producer.enqueueTurn({ prompt: "this one fails", cwd: setup.ws, options: { env } });
    const r2 = await setup.producer.waitForTurn(t2.turn, { timeoutMs: 60_000 });
    assert.equal(
      r2.status,
      "failed",
      JSON.stringify({
        r2,
        reqs: setup.server.requests().map((q) => [q.kind, q.responseIndex, q.lastUserText.slice(0, 80)]),
      }),
    );

    // The CLI really saw the secrets: the model server got them back in the tool result.
    const toModel = JSON.stringify(setup.server.requests().map((q) => q.messages));
    for (const planted of [canaries.deploy, canaries.greeting, canaries.registered])
      assert.ok(toModel.includes(planted), "the Bash output reached the model");

    await worker.close({ graceMs: 5000 });
    await telemetry.shutdown();

    // Each channel was exercised, and what it carried was replaced.
    const events = [...(await setup.events(t1.session)), ...(await setup.events(t2.session))];
    const logText = JSON.stringify(events.filter((e) => e.kind !== "session.snapshot"));
    const stderrEvents = events.filter((e) => e.kind === "cli.stderr").map((e) => String(dataOf(e)["text"]));
    assert.ok(
      stderrEvents.some(
        (stderrText) =>
          stderrText.includes(`token=${redactionMarker("WRAPPER_TOKEN")}`) ||
          stderrText.includes(`token=${redactionMarker("STDERR_NOTE_TOKEN")}`),
      ),
      stderrEvents.join("\n"),
    );
    assert.ok(logText.includes(`deploy=${redactionMarker("DEPLOY_TOKEN")}`), "the Bash output is in the log, redacted");
    assert.ok(logText.includes(redactionMarker("WORKER_GREETING")), "the referenced plain-named value is redacted");
    assert.ok(
      logText.includes(redactionMarker("TEST_REGISTERED")),
      "the registered value in the Bash command is redacted",
    );
    assert.ok(
      logText.includes(`signature ${redactionMarker("API_SIGNING_SECRET")}`),
      JSON.stringify(events.filter((e) => e.turn === t2.turn && e.kind === "cli.line").map((e) => dataOf(e)["raw"])),
    );
    // Redacted raw lines still parse.
    for (const event of events.filter((x) => x.kind === "cli.line")) JSON.parse(String(dataOf(event)["raw"]));
    assert.ok(
      logLines.some((l) => l.includes("event observer threw") && l.includes(redactionMarker("TEST_REGISTERED"))),
      "the thrown error was logged, scrubbed",
    );

    const bodies = receiver.requests.map((q) => q.bodyText);
    assert.ok(bodies.length > 0, "spans were exported");
    const names = receiver.jsonSpanNames();
    assert.ok(names.includes(toolSpanName("Bash")), names.join(", "));
    assert.equal(names.filter((n) => n === ATTEMPT_SPAN_NAME).length, 2, names.join(", "));
    const allSpans = bodies.join("\n");
    assert.ok(allSpans.includes(`"key":"${GENAI.errorType}"`), "the failed attempt's span names its error kind");

    const keys = new Map([
      ...(await dumpKeys(setup.redis, `${setup.space.queuePrefix}*`)),
      ...(await dumpKeys(setup.redis, `${setup.space.logPrefix}*`)),
    ]);
    assert.ok(
      [...keys.keys()].some((k) => k.includes(t2.turn)),
      "the job records were dumped",
    );
    const sinks: Array<[string, string]> = [
      ...bodies.map((b, i): [string, string] => [`OTLP request ${i}`, b]),
      ...logLines.map((l, i): [string, string] => [`log line ${i}`, l]),
      ...[...keys].map(([k, v]): [string, string] => [`redis ${k}`, v]),
      ["event log", logText],
      ...snapshotFiles(events).map((f, i): [string, string] => [`session snapshot ${i}`, f]),
    ];
    assert.ok(
      snapshotFiles(events).some((f) => f.includes(redactionMarker("DEPLOY_TOKEN"))),
      "the session file held the Bash output, redacted",
    );
    for (const [name, value] of Object.entries(canaries)) {
      const hits = sinks.filter(([, text]) => text.includes(value)).map(([where]) => where);
      assert.deepEqual(hits, [], `canary ${name} leaked into: ${hits.join(", ")}`);
    }
  } finally {
    await telemetry.shutdown();
    await receiver.close();
    await setup.dispose();
  }
});

// Secret shapes the worker was never told about, as an attacker's workspace or a careless tool
// prints them. Random each run, so no real-looking token sits in the repository.
const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const randomOf = (chars: string, n: number): string =>
  Array.from(randomBytes(n), (b) => chars[b % chars.length]).join("");
const b64url = (o: object): string => Buffer.from(JSON.stringify(o)).toString("base64url");

function shapedSecrets(): { github_token: string; aws_access_key_id: string; jwt: string; anthropic_key: string } {
  return {
    github_token: `ghp_${randomOf(ALNUM, 36)}`,
    aws_access_key_id: `AKIA${randomOf("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)}`,
    jwt: `${b64url({ alg: "HS256", typ: "JWT" })}.${b64url({ sub: randomOf(ALNUM, 12) })}.${randomOf(ALNUM + "_-", 43)}`,
    anthropic_key: `sk-ant-api03-${randomOf(ALNUM + "_-", 40)}`,
  };
}

test("secret shapes in tool output, the model's text and the result never reach Redis; the log shows markers and still parses", async () => {
  const file = shapedSecrets();
  const inResult = `ghp_${randomOf(ALNUM, 36)}`;
  const setup = await rig({
    responses: [
      {
        content: [
          {
            type: "tool_use",
            name: "Bash",
            input: { command: "cat deploy.env", description: "read the deploy settings" },
          },
        ],
      },
      { content: [{ type: "text", text: `Read them. The deploy token is ${inResult}` }] },
      { content: [{ type: "text", text: "resumed" }] },
    ],
  });
  try {
    // The workspace is attacker input: one secret per line, as a .env or a key dump holds them.
    writeFileSync(
      join(setup.ws, "deploy.env"),
      `GITHUB_TOKEN=${file.github_token}\n${file.aws_access_key_id}\nsession: ${file.jwt}\n${file.anthropic_key}\n`,
    );
    const worker = setup.worker();
    const queued = await setup.producer.enqueueTurn({
      prompt: "read deploy.env",
      cwd: setup.ws,
      options: { allowedTools: ["Bash"] },
    });
    const res = await setup.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    // The CLI really printed them: the model got the file back in the tool result.
    const toModel = JSON.stringify(setup.server.requests().map((q) => q.messages));
    for (const planted of Object.values(file))
      assert.ok(toModel.includes(planted), "the tool output reached the model");

    // The next turn resumes from the scrubbed session file: the model sees markers, not secrets.
    const t2 = await setup.producer.enqueueTurn({ prompt: "and now?", cwd: setup.ws, session: queued.session });
    const res2 = await setup.producer.waitForTurn(t2.turn, { timeoutMs: 60_000 });
    assert.equal(res2.status, "finished", JSON.stringify(res2.event.data));
    assert.equal(res2.cliSessionId, res.cliSessionId, "the session was resumed");
    const resumed = JSON.stringify(setup.server.requests().at(-1)!.messages);
    assert.ok(
      resumed.includes(redactionMarker("github_token")) && !resumed.includes(file.github_token),
      "the resumed history holds the marker",
    );
    await worker.close({ graceMs: 5000 });

    const events = await setup.events(queued.session);
    const logText = JSON.stringify(events.filter((e) => e.kind !== "session.snapshot"));
    for (const shape of Object.keys(file))
      assert.ok(logText.includes(redactionMarker(shape)), `${shape} is redacted in the log`);
    for (const event of events.filter((x) => x.kind === "cli.line")) JSON.parse(String(dataOf(event)["raw"]));
    const finished = events.find((e) => e.kind === "turn.finished")!;
    assert.equal(dataOf(finished)["resultText"], `Read them. The deploy token is ${redactionMarker("github_token")}`);
    assert.equal(res.resultText, dataOf(finished)["resultText"]);

    const keys = new Map([
      ...(await dumpKeys(setup.redis, `${setup.space.queuePrefix}*`)),
      ...(await dumpKeys(setup.redis, `${setup.space.logPrefix}*`)),
    ]);
    assert.ok(
      [...keys.keys()].some((k) => k.includes(queued.turn)),
      "the job record was dumped",
    );
    const snapshots = snapshotFiles(events);
    assert.ok(snapshots.length >= 2, "both turns left a snapshot");
    for (const [name, value] of Object.entries({ ...file, inResult })) {
      const hits = [...keys].filter(([, text]) => text.includes(value)).map(([k]) => k);
      assert.deepEqual(hits, [], `${name} is stored unscrubbed in: ${hits.join(", ")}`);
      assert.ok(!snapshots.some((f) => f.includes(value)), `${name} is in a session snapshot`);
    }
  } finally {
    await setup.dispose();
  }
});

test("keepRawLines keeps cli.line text, the result text and the session file as the CLI wrote them", async () => {
  const token = `ghp_${randomOf(ALNUM, 36)}`;
  const setup = await rig({ responses: [{ content: [{ type: "text", text: `raw ${token}` }] }] });
  try {
    setup.worker({ keepRawLines: true });
    const queued = await setup.producer.enqueueTurn({ prompt: "say it", cwd: setup.ws });
    const res = await setup.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    assert.equal(res.resultText, `raw ${token}`);
    const events = await setup.events(queued.session);
    assert.ok(events.some((e) => e.kind === "cli.line" && String(dataOf(e)["raw"]).includes(token)));
    assert.ok(
      snapshotFiles(events).some((f) => f.includes(token)),
      "the session file is kept as the CLI wrote it",
    );
  } finally {
    await setup.dispose();
  }
});
