// The CLI's own spans through the worker, real CLI, one stage and four workers in turn (only one
// takes jobs at a time): tracing on exports the CLI's spans under the attempt span, in the session's
// one trace, whose one root is the session's own span (a re-export from the log emits it with the same
// ids); a warm session's second turn's CLI spans land under that turn's attempt; content on keeps the
// prompt, scrubbed; TURNSTREAM_CLI_TELEMETRY off leaves the CLI's telemetry off. Secrets are
// planted in the prompt, a tool's output, the job's env (a reference), and the worker's own env (its
// model key and its collector's OTLP header); a tool of the run plays the attacker against the
// receiver with the token its env holds. What the worker exports goes to a real OTLP/HTTP receiver,
// and none of the secrets is in those bytes.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { collectSessionTraces } from "../../src/bin/commands/_export-traces.ts";
import {
  ATTEMPT_SPAN_NAME,
  createScrubber,
  SESSION_SPAN_NAME,
  sessionSpanContext,
  startTelemetry,
  type Telemetry,
} from "../../src/telemetry/index.ts";
import type { TurnWorkerOptions } from "../../src/worker/index.ts";
import { startOtlpReceiver, type OtlpReceiver } from "../telemetry/otlp-receiver.ts";
import { cliEnviron, forgePrelude } from "./_cli-environ.ts";
import { rig, type Rig } from "./_more.ts";

const hex = (bytes: number): string => randomBytes(bytes).toString("hex");
const alnum = (length: number): string =>
  randomBytes(length * 2)
    .toString("base64")
    .replace(/[^A-Za-z0-9]/g, "")
    .slice(0, length);

// Pattern-shaped secrets (the scrubber knows them by their shape) and plain ones (known by value, or
// content that must be dropped).
const canaries = {
  prompt: `cnryprompt${hex(8)}`,
  tool: `ghp_${alnum(36)}`,
  job: `cnryjob${hex(8)}`,
  apiKey: `sk-ant-api03-${hex(16)}`,
  collector: `cnrycollector${hex(8)}`,
  forged: `ghp_${alnum(36)}`,
  forgedKey: `cnrykey${hex(8)}`,
};

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: Array<{ key: string; value: Record<string, unknown> }>;
  service: string;
}

const attr = (span: OtlpSpan, key: string): unknown =>
  Object.values(span.attributes.find((a) => a.key === key)?.value ?? {})[0];

/** Every span the worker exported so far, with its resource's service.name. */
function exportedSpans(receiver: OtlpReceiver): OtlpSpan[] {
  type Body = {
    resourceSpans?: Array<{
      resource?: { attributes?: OtlpSpan["attributes"] };
      scopeSpans?: Array<{ spans?: Array<Omit<OtlpSpan, "service">> }>;
    }>;
  };
  const spans: OtlpSpan[] = [];
  for (const request of receiver.requests) {
    for (const resourceSpans of (request.json as Body | undefined)?.resourceSpans ?? []) {
      const serviceAttr = resourceSpans.resource?.attributes?.find((a) => a.key === "service.name");
      const service = String(Object.values(serviceAttr?.value ?? {})[0]);
      for (const scope of resourceSpans.scopeSpans ?? [])
        for (const span of scope.spans ?? []) spans.push({ ...span, service });
    }
  }
  return spans;
}

// A tool of the run posts forged spans to the receiver the CLI's env names, with the token it finds
// there (kept in the workspace for the test to read as well).
const FORGE =
  forgePrelude("first") +
  String.raw`url="$(cli OTEL_EXPORTER_OTLP_ENDPOINT)/v1/traces"
trace=$(cli TRACEPARENT | cut -d- -f2)
parent=$(cli TRACEPARENT | cut -d- -f3)
now="$(date +%s)000000000"
body() {
  printf '{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"scope":{"name":"forged"},"spans":[{"traceId":"%s","spanId":"%s","parentSpanId":"%s","name":"forged.span","kind":1,"startTimeUnixNano":"%s","endTimeUnixNano":"%s","attributes":[{"key":"model","value":{"stringValue":"%s"}},{"key":"%s","value":{"boolValue":true}}]}]}]}]}' "$1" "$2" "$parent" "$now" "$now" "$FORGED_MODEL" "$FORGED_KEY"
}
post() { curl -s -o forge-out -w '%{http_code}' -H 'Expect:' -H "content-type: application/json" "$@"; printf ' %s\n' "$(tr -d '"' < forge-out)"; }
printf 'forge other-trace='; body ffffffffffffffffffffffffffffffff aaaaaaaaaaaaaaaa | post -H "Authorization: Bearer $tok" --data-binary @- "$url"
printf 'forge own-trace='; body "$trace" bbbbbbbbbbbbbbbb | post -H "Authorization: Bearer $tok" --data-binary @- "$url"
printf 'forge no-token='; body "$trace" cccccccccccccccc | post --data-binary @- "$url"
printf 'forge bad-token='; body "$trace" dddddddddddddddd | post -H "Authorization: Bearer turnstream-otlp-guess" --data-binary @- "$url"
head -c 5000000 /dev/zero | tr '\0' ' ' > forge-big.json
printf 'forge huge='; post -H "Authorization: Bearer $tok" --data-binary @forge-big.json "$url"
`;

const bash = (command: string, match: string): Record<string, unknown> => ({
  match,
  content: [{ type: "tool_use", name: "Bash", input: { command, description: "run it" } }],
});

let stage: Rig;
let receiver: OtlpReceiver;
let telemetry: Telemetry;
const savedEnv: Record<string, string | undefined> = {};

/** An in-process worker on the stage with the CLI telemetry settings given; closed after its turns. */
function worker(cliTelemetry: TurnWorkerOptions["cliTelemetry"]) {
  return stage.worker({
    telemetry,
    scrubber: createScrubber({ env: process.env }),
    secretEnv: { WORKER_JOB_SECRET: canaries.job },
    sandboxed: true,
    toolSandbox: { mode: "off" },
    cliTelemetry,
  });
}

async function runTurn(prompt: string, session?: string, warm = false): Promise<{ session: string; turn: string }> {
  const queued = await stage.producer.enqueueTurn({
    prompt,
    cwd: stage.ws,
    session,
    options: { skipPermissions: true, warm, env: { JOB_SECRET: { fromEnv: "WORKER_JOB_SECRET" } } },
  });
  const result = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 120_000 });
  assert.equal(result.status, "finished", JSON.stringify(result.event.data));
  return queued;
}

/** What the model was sent: the tools' outputs, raw (the model server is the CLI's upstream). */
const sentToModel = (): string => JSON.stringify(stage.server.requests().map((q) => q.messages));

before(async () => {
  // The worker's own environment: its model key and its collector's API key in the OTLP headers.
  for (const name of ["ANTHROPIC_API_KEY", "OTEL_EXPORTER_OTLP_HEADERS"]) savedEnv[name] = process.env[name];
  process.env["ANTHROPIC_API_KEY"] = canaries.apiKey;
  process.env["OTEL_EXPORTER_OTLP_HEADERS"] = `x-collector-key=${canaries.collector}`;
  receiver = await startOtlpReceiver();
  telemetry = startTelemetry({
    scrubber: createScrubber({ env: process.env }),
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_EXPORTER_OTLP_HEADERS: process.env["OTEL_EXPORTER_OTLP_HEADERS"],
    },
  });
  const forged = { FORGED_MODEL: canaries.forged, FORGED_KEY: canaries.forgedKey };
  const envLine = Object.entries(forged)
    .map(([name, value]) => `${name}=${value}`)
    .join(" ");
  stage = await rig(
    {
      responses: [
        bash(
          `env | sort; echo "job=$JOB_SECRET"; echo "${canaries.tool}"; ${envLine} sh forge.sh first; echo marker-first`,
          "first turn",
        ),
        { match: "marker-first", content: [{ type: "text", text: "printed" }] },
        { match: "second turn", content: [{ type: "text", text: "second done" }] },
        bash(`echo "job=$JOB_SECRET"; echo "${canaries.tool}"; echo marker-content`, "content turn"),
        { match: "marker-content", content: [{ type: "text", text: "content printed" }] },
        bash("sh forge.sh off; echo marker-off", "off turn"),
        { match: "marker-off", content: [{ type: "text", text: "off done" }] },
        { match: "warm one", content: [{ type: "text", text: "warm one done" }] },
        { match: "warm two", content: [{ type: "text", text: "warm two done" }] },
      ],
    },
    { allowEnv: ["JOB_SECRET"] },
  );
  writeFileSync(join(stage.ws, "forge.sh"), FORGE);
});

after(async () => {
  await stage.dispose();
  await telemetry.shutdown();
  await receiver.close();
  for (const [name, value] of Object.entries(savedEnv))
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
});

test("CLI spans join the attempt span, a session is one trace, a tool's forged spans are refused or scrubbed", async () => {
  const turnWorker = worker(undefined);
  const first = await runTurn(`first turn: deploy with ${canaries.prompt}`);
  const second = await runTurn("second turn", first.session);
  const lateStatus = await postWithTheToolsToken();
  await turnWorker.close({ graceMs: 5000 });
  await telemetry.forceFlush();

  const spans = exportedSpans(receiver);
  const session = sessionSpanContext(stage.space.logPrefix, first.session);
  const attempts = spans.filter((s) => s.name === ATTEMPT_SPAN_NAME && s.traceId === session.traceId);
  assert.equal(attempts.length, 2, "both turns' attempt spans are in the session's trace");
  for (const attempt of attempts) assert.equal(attempt.parentSpanId, session.spanId);
  assertOneRoot(
    spans.filter((s) => s.traceId === session.traceId),
    session.spanId,
  );
  await assertReplayedRoot(first.session, session);
  const turnOf = (span: OtlpSpan): unknown => attr(span, "turnstream.turn");
  const firstAttempt = attempts.find((s) => turnOf(s) === first.turn)!;
  const secondAttempt = attempts.find((s) => turnOf(s) === second.turn)!;

  const cli = spans.filter((s) => s.service === "claude-code");
  const names = new Set(cli.map((s) => s.name));
  for (const name of ["claude_code.interaction", "claude_code.llm_request", "claude_code.tool"])
    assert.ok(names.has(name), [...names].join(", "));
  assert.ok(
    cli.every((s) => s.traceId === session.traceId),
    "every CLI span is in the session's trace",
  );
  const interactions = cli.filter((s) => s.name === "claude_code.interaction");
  assert.deepEqual(
    interactions.map((s) => s.parentSpanId).sort(),
    [firstAttempt.spanId, secondAttempt.spanId].sort(),
    "each turn's interaction span is a child of that turn's attempt span",
  );
  const bashSpan = cli.find((s) => s.name === "claude_code.tool" && attr(s, "tool_name") === "Bash");
  assert.ok(bashSpan !== undefined);
  for (const span of interactions) {
    assert.equal(attr(span, "user_prompt"), undefined, "content is dropped by default");
    assert.equal(attr(span, "user.id"), undefined, "identity is dropped");
  }

  // The CLI's env: telemetry pointed at the worker, under the attempt span; none of the worker's own OTEL_*.
  const environ = cliEnviron(stage.ws, "first");
  assert.equal(environ.get("TRACEPARENT"), `00-${session.traceId}-${firstAttempt.spanId}-01`);
  assert.match(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") ?? "", /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.match(environ.get("OTEL_EXPORTER_OTLP_HEADERS") ?? "", /^Authorization=Bearer turnstream-otlp-/);
  assert.equal(environ.get("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/json");
  const environText = [...environ].join("\n");
  assert.ok(!environText.includes(canaries.collector), "the worker's collector key never reaches the CLI");
  assert.ok(!environText.includes(canaries.apiKey), "the worker's model key never reaches the CLI");
  const toModel = sentToModel();
  assert.ok(toModel.includes("marker-first"), "the tool ran");

  // The attacker: another trace refused, no or a wrong token 401, a huge body 413; its own-trace span
  // is exported with the secret-shaped value scrubbed and the unlisted attribute dropped.
  const forgeResult = (name: string): string =>
    new RegExp(String.raw`forge ${name}=(\d+ [^\\]*)`).exec(toModel)?.[1] ?? "";
  assert.match(forgeResult("other-trace"), /^200 .*rejectedSpans:1/);
  assert.match(forgeResult("own-trace"), /^200 \{\}/);
  assert.match(forgeResult("no-token"), /^401/);
  assert.match(forgeResult("bad-token"), /^401/);
  assert.match(forgeResult("huge"), /^413/);
  const forged = cli.filter((s) => s.name === "forged.span");
  assert.equal(forged.length, 1, "only the span in the run's own trace was taken");
  assert.equal(forged[0]!.parentSpanId, firstAttempt.spanId);
  assert.ok(!String(attr(forged[0]!, "model")).includes(canaries.forged));
  assert.equal(attr(forged[0]!, canaries.forgedKey), undefined);
  assert.ok(!spans.some((s) => s.traceId === "ffffffffffffffffffffffffffffffff"));

  assert.equal(lateStatus.status, 401, "the token the tool saw is dead once its run ended");
  assertNoCanary(lateStatus.token);
});

test("TURNSTREAM_CLI_TELEMETRY_CONTENT=1 keeps the prompt, scrubbed; no secret leaves", async () => {
  const turnWorker = worker({ content: true });
  // A secret the worker knows by value (the producer refuses secret-shaped prompts).
  const turn = await runTurn(`content turn: deploy with ${canaries.job}`);
  await turnWorker.close({ graceMs: 5000 });
  await telemetry.forceFlush();
  const session = sessionSpanContext(stage.space.logPrefix, turn.session);
  const cli = exportedSpans(receiver).filter((s) => s.service === "claude-code" && s.traceId === session.traceId);
  const interaction = cli.find((s) => s.name === "claude_code.interaction");
  assert.ok(interaction !== undefined, cli.map((s) => s.name).join(", "));
  const prompt = String(attr(interaction, "user_prompt"));
  assert.ok(prompt.startsWith("content turn: deploy with "), prompt);
  assert.ok(!prompt.includes(canaries.job));
  assertNoCanary();
});

test("TURNSTREAM_CLI_TELEMETRY=off: no telemetry variable in the CLI's env, no CLI span", async () => {
  const turnWorker = worker({ enabled: false });
  const turn = await runTurn("off turn");
  await turnWorker.close({ graceMs: 5000 });
  await telemetry.forceFlush();
  const environ = cliEnviron(stage.ws, "off");
  assert.ok(environ.has("PATH"), "the tool read the CLI's env");
  const telemetryNames = [...environ.keys()].filter(
    (name) => name.startsWith("OTEL_") || name === "TRACEPARENT" || name === "CLAUDE_CODE_ENABLE_TELEMETRY",
  );
  assert.deepEqual(telemetryNames, []);
  const session = sessionSpanContext(stage.space.logPrefix, turn.session);
  const inTrace = exportedSpans(receiver).filter((s) => s.traceId === session.traceId);
  assert.ok(
    inTrace.some((s) => s.name === ATTEMPT_SPAN_NAME),
    "the worker's own spans still go out",
  );
  assert.ok(!inTrace.some((s) => s.service === "claude-code"));
});

test("a warm session's second turn: its CLI's spans land under that turn's attempt span", async () => {
  const turnWorker = worker(undefined);
  const first = await runTurn("warm one", undefined, true);
  const second = await runTurn("warm two", first.session, true);
  const started = (await stage.events(first.session, second.turn)).find((e) => e.kind === "attempt.started");
  assert.equal((started?.data as { warm?: string }).warm, "warm", "the kept process answered the second turn");
  // Closing the worker ends the kept process, which sends what spans it still holds.
  await turnWorker.close({ graceMs: 5000 });
  await telemetry.forceFlush();
  const session = sessionSpanContext(stage.space.logPrefix, first.session);
  const inTrace = exportedSpans(receiver).filter((s) => s.traceId === session.traceId);
  const attemptOf = (turn: string): OtlpSpan =>
    inTrace.find((s) => s.name === ATTEMPT_SPAN_NAME && attr(s, "turnstream.turn") === turn)!;
  const interactions = inTrace.filter((s) => s.service === "claude-code" && s.name === "claude_code.interaction");
  assert.deepEqual(
    interactions.map((s) => s.parentSpanId).sort(),
    [attemptOf(first.turn).spanId, attemptOf(second.turn).spanId].sort(),
    "one interaction under each turn's attempt span",
  );
  assertOneRoot(inTrace, session.spanId);
});

/** The trace's only root is the session's span; every span's parents lead to it, none is missing. */
function assertOneRoot(inTrace: OtlpSpan[], sessionSpanId: string): void {
  const roots = inTrace.filter((s) => (s.parentSpanId ?? "") === "");
  assert.deepEqual(
    roots.map((s) => [s.name, s.spanId]),
    [[SESSION_SPAN_NAME, sessionSpanId]],
  );
  const byId = new Map(inTrace.map((s) => [s.spanId, s]));
  for (const span of inTrace) {
    let at: OtlpSpan | undefined = span;
    for (let depth = 0; at !== undefined && (at.parentSpanId ?? "") !== "" && depth < 64; depth++)
      at = byId.get(at.parentSpanId!);
    assert.equal(at?.spanId, sessionSpanId, `${span.name}'s parents reach the session's span`);
  }
}

/** A re-export of the session from its log emits the session's span with the same ids, once. */
async function assertReplayedRoot(sessionId: string, session: { traceId: string; spanId: string }): Promise<void> {
  const replayed = await collectSessionTraces({
    log: stage.producer.log,
    session: sessionId,
    env: {},
  });
  const roots = replayed.spans.filter((s) => s.name === SESSION_SPAN_NAME);
  assert.deepEqual(
    roots.map((s) => [s.spanContext().traceId, s.spanContext().spanId, s.parentSpanContext?.spanId]),
    [[session.traceId, session.spanId, undefined]],
  );
  const attempts = replayed.spans.filter((s) => s.name === ATTEMPT_SPAN_NAME);
  assert.equal(attempts.length, 2);
  for (const attempt of attempts) assert.equal(attempt.parentSpanContext?.spanId, session.spanId);
}

/** The first turn's token, posted again after its run ended (the receiver still up). */
async function postWithTheToolsToken(): Promise<{ status: number; token: string }> {
  const environ = cliEnviron(stage.ws, "first");
  const token = environ.get("OTEL_EXPORTER_OTLP_HEADERS")!.replace("Authorization=Bearer ", "");
  const late = await fetch(`${environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")}/v1/traces`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: "{}",
  });
  return { status: late.status, token };
}

/** None of the planted secrets (nor the run's token) is in any byte the worker exported. */
function assertNoCanary(token?: string): void {
  const planted: string[] = [...Object.values(canaries), ...(token === undefined ? [] : [token])];
  const bodies = receiver.requests.map((q) => q.bodyText);
  assert.ok(bodies.length > 0);
  const leaks = planted.filter((secret) => bodies.some((body) => body.includes(secret)));
  assert.deepEqual(leaks, []);
}
