// Worker CPU per turn with the CLI's own spans joined into the attempt's trace, against
// TURNSTREAM_CLI_TELEMETRY=off, both with the worker's tracing on (OTLP/HTTP JSON to a receiver in
// this process that keeps nothing it need not). A stand-in CLI replays a real turn's lines (as the
// worker-cpu bench does) and, when its env turns telemetry on, posts at exit a traces request of
// ~32 KB shaped like the real CLI's (interaction, llm_request, tool, tool.execution spans with the
// attributes CLI 2.1.332 sends, user id and prompt included), under the TRACEPARENT it was given,
// with the token its env holds, and a metrics request like the real CLI's at the end of a turn that
// edited a file (sessions, lines of code, cost, tokens, an edit decision, active time, in delta). The
// worker keeps metrics (its OTLP endpoint is set), so the CLI is asked for them when its telemetry is
// on. The worker is a process of its own; its CPU is read from /proc.
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createProducer } from "../src/queue/index.ts";
import { startOtlpReceiver, type OtlpReceiver } from "../test/telemetry/otlp-receiver.ts";
import { startModelServer } from "../src/testing/index.ts";
import {
  cleanupKeys,
  cliEnv,
  redisFor,
  startWorkerProcess,
  testSpace,
  type TestSpace,
} from "../test/worker/_support.ts";
import { CONCURRENCY, queuedRound } from "./_rounds.ts";
import { median } from "./_stats.ts";

export interface CliSpansResult {
  /** Median worker CPU ms per turn, CLI spans joined / off. */
  cliSpansCpuRatio: number;
  onCpuMsPerTurn: number;
  offCpuMsPerTurn: number;
  /** Bytes of the stand-in's traces request. */
  payloadBytes: number;
  /** Bytes of the stand-in's metrics request. */
  metricsPayloadBytes: number;
  /** CLI spans the worker exported in the last round with them on. */
  cliSpansExported: number;
}

const attribute = (key: string, value: string | number | boolean): Record<string, unknown> => ({
  key,
  value:
    typeof value === "string"
      ? { stringValue: value }
      : typeof value === "boolean"
        ? { boolValue: value }
        : { intValue: value },
});

/** The resource the real CLI names itself by, on its spans and its metrics alike. */
const CLI_RESOURCE = {
  attributes: [
    attribute("host.arch", "amd64"),
    attribute("os.type", "linux"),
    attribute("service.name", "claude-code"),
    attribute("service.version", "2.1.332"),
  ],
};

/** The attributes every span of the real CLI carries. */
const COMMON = {
  "user.id": "85ae7734ba3c2a6ab84e7491d890e0bc40b025e5f343a1ac40efe13168b2d1b7",
  "session.id": "4d01c21a-96c4-4c41-8164-44ecdd2f8ae1",
  "anthropic.provider": "firstParty",
  "anthropic.custom_base_url": true,
  "terminal.type": "non-interactive",
  "gen_ai.provider.name": "anthropic",
  "gen_ai.conversation.id": "4d01c21a-96c4-4c41-8164-44ecdd2f8ae1",
};

const LLM = {
  "span.type": "llm_request",
  model: "claude-opus-5-5",
  "gen_ai.system": "anthropic",
  "gen_ai.request.model": "claude-opus-5-5",
  "gen_ai.operation.name": "chat",
  "llm_request.context": "interaction",
  speed: "normal",
  query_source_safe: "sdk",
  duration_ms: 69,
  input_tokens: 12,
  output_tokens: 6,
  cache_read_tokens: 0,
  cache_creation_tokens: 0,
  success: true,
  attempt: 1,
  ttft_ms: 21,
  first_content_ms: 22,
  effort: "medium",
  stop_reason: "tool_use",
  "gen_ai.usage.input_tokens": 12,
  "gen_ai.usage.output_tokens": 6,
  "gen_ai.response.model": "claude-opus-5-5",
};

const TOOL = {
  "span.type": "tool",
  tool_name: "Bash",
  tool_name_safe: "Bash",
  "gen_ai.operation.name": "execute_tool",
  "gen_ai.tool.name": "Bash",
  bash_command_class: "shell_builtin",
  bash_argv0: "echo",
  tool_use_id: "toolu_S_3mQlKppcKYYeyJ",
  "gen_ai.tool.call.id": "toolu_S_3mQlKppcKYYeyJ",
  duration_ms: 51,
};

/** A traces request like the real CLI's, @TRACE@ and @PARENT@ for the stand-in to fill in; ~`bytes` long. */
function cliTracesPayload(bytes: number): string {
  const now = Date.now();
  const spans: unknown[] = [];
  const span = (id: number, parent: string, name: string, attributes: Record<string, string | number | boolean>) => ({
    traceId: "@TRACE@",
    spanId: id.toString(16).padStart(16, "0"),
    parentSpanId: parent,
    name,
    kind: 1,
    startTimeUnixNano: `${now + id}000000`,
    endTimeUnixNano: `${now + id + 5}000000`,
    attributes: Object.entries({ ...COMMON, ...attributes }).map(([k, v]) => attribute(k, v)),
    status: { code: 0 },
    events:
      name === "claude_code.llm_request"
        ? [{ timeUnixNano: `${now + id}000000`, name: "gen_ai.request.attempt", attributes: [attribute("attempt", 1)] }]
        : [],
  });
  const root = "00000000000000ff";
  spans.push(
    span(255, "@PARENT@", "claude_code.interaction", {
      "span.type": "interaction",
      "gen_ai.operation.name": "invoke_agent",
      user_prompt: "<REDACTED>",
      user_prompt_length: 23,
      "interaction.sequence": 1,
      "interaction.duration_ms": 241,
    }),
  );
  const request = (): string =>
    JSON.stringify({
      resourceSpans: [
        {
          resource: CLI_RESOURCE,
          scopeSpans: [{ scope: { name: "com.anthropic.claude_code.tracing", version: "1.0.0" }, spans }],
        },
      ],
    });
  for (let id = 1; request().length < bytes; id += 3) {
    spans.push(span(id, root, "claude_code.llm_request", LLM));
    spans.push(span(id + 1, root, "claude_code.tool", TOOL));
    spans.push(
      span(id + 2, (id + 1).toString(16).padStart(16, "0"), "claude_code.tool.execution", {
        "span.type": "tool.execution",
        duration_ms: 34,
        success: true,
      }),
    );
  }
  return request();
}

/** A metrics request like the real CLI's after a turn that edited a TypeScript file (delta temporality). */
function cliMetricsPayload(): string {
  const now = Date.now();
  const point = (value: number, attributes: Record<string, string | number | boolean>) => ({
    attributes: Object.entries({ ...COMMON, ...attributes }).map(([k, v]) => attribute(k, v)),
    startTimeUnixNano: `${now - 200}000000`,
    timeUnixNano: `${now}000000`,
    asDouble: value,
  });
  const sum = (name: string, points: unknown[]) => ({
    name,
    sum: { aggregationTemporality: 1, isMonotonic: true, dataPoints: points },
  });
  const usage = { model: "claude-opus-5-5", query_source: "main", effort: "medium" };
  const metrics = [
    sum("claude_code.session.count", [point(1, { start_type: "fresh" })]),
    sum("claude_code.lines_of_code.count", [
      point(3, { type: "added", model: "claude-opus-5-5" }),
      point(2, { type: "removed", model: "claude-opus-5-5" }),
    ]),
    sum("claude_code.cost.usage", [point(0.000336, usage)]),
    sum(
      "claude_code.token.usage",
      [
        ["input", 24],
        ["output", 12],
        ["cacheRead", 0],
        ["cacheCreation", 0],
      ].map(([type, value]) => point(Number(value), { ...usage, type: String(type) })),
    ),
    sum("claude_code.code_edit_tool.decision", [
      point(1, { decision: "accept", source: "config", tool_name: "Edit", language: "TypeScript" }),
    ]),
    sum("claude_code.active_time.total", [point(0.164, { type: "cli" })]),
  ];
  return JSON.stringify({
    resourceMetrics: [
      {
        resource: CLI_RESOURCE,
        scopeMetrics: [{ scope: { name: "com.anthropic.claude_code", version: "2.1.332" }, metrics }],
      },
    ],
  });
}

/**
 * The stand-in CLI (worker-cpu's, plus the traces request at exit when its telemetry is on, and the
 * metrics request when it is asked for metrics).
 */
function standInCli(bin: string): { path: string; payloadBytes: number; metricsPayloadBytes: number } {
  const recorded = readFileSync(join(import.meta.dirname, "../test/fixtures/cli/plain-reply.jsonl"), "utf8")
    .trim()
    .split("\n");
  const init = JSON.parse(recorded[0]!) as { session_id: string; cwd: string };
  recorded.forEach((line, index) =>
    writeFileSync(
      join(bin, `l${index}.json`),
      line.split(init.session_id).join("@SID@").split(init.cwd).join("@CWD@") + "\n",
    ),
  );
  writeFileSync(
    join(bin, "base.jsonl"),
    (JSON.stringify({ type: "filler", text: "x".repeat(900) }) + "\n").repeat(155),
  );
  const payload = cliTracesPayload(32 * 1024);
  writeFileSync(join(bin, "otlp.json"), payload);
  const metricsPayload = cliMetricsPayload();
  writeFileSync(join(bin, "metrics.json"), metricsPayload);
  const path = join(bin, "claude");
  writeFileSync(
    path,
    `#!/bin/bash
[ "$1" = "--version" ] && { echo "2.1.332 (stand-in)"; exit 0; }
sid=""
while [ $# -gt 0 ]; do [ "$1" = "--resume" ] && sid="$2"; shift; done
cat > /dev/null
dir="$CLAUDE_CONFIG_DIR/projects/$(pwd | sed 's/[^A-Za-z0-9]/-/g')"
mkdir -p "$dir"
[ -z "$sid" ] && sid=$(cat /proc/sys/kernel/random/uuid)
[ -f "$dir/$sid.jsonl" ] || cat ${bin}/base.jsonl > "$dir/$sid.jsonl"
out() { sed -e "s|@SID@|$sid|g" -e "s|@CWD@|$PWD|g" ${bin}/l$1.json; }
out 0; sleep 0.1; out 1; sleep 0.012; out 2
# Off, the same processes run and post to a closed port: the worker's cgroup and process-tree work
# is the same in both modes, and only what the worker does with the requests differs (the real CLI
# posts from its own process).
endpoint="\${OTEL_EXPORTER_OTLP_ENDPOINT:-http://127.0.0.1:1}"
trace=$(echo "\${TRACEPARENT:-00-0-0-01}" | cut -d- -f2); parent=$(echo "\${TRACEPARENT:-00-0-0-01}" | cut -d- -f3)
sed -e "s/@TRACE@/$trace/g" -e "s/@PARENT@/$parent/g" ${bin}/otlp.json |
  curl -s -o /dev/null -H "Authorization: \${OTEL_EXPORTER_OTLP_HEADERS#Authorization=}" \\
    -H 'content-type: application/json' --data-binary @- "$endpoint/v1/traces"
[ "$OTEL_METRICS_EXPORTER" = otlp ] || endpoint=http://127.0.0.1:1
curl -s -o /dev/null -H "Authorization: \${OTEL_EXPORTER_OTLP_HEADERS#Authorization=}" \\
  -H 'content-type: application/json' --data-binary @${bin}/metrics.json "$endpoint/v1/metrics"
`,
  );
  chmodSync(path, 0o755);
  return { path, payloadBytes: Buffer.byteLength(payload), metricsPayloadBytes: Buffer.byteLength(metricsPayload) };
}

/** CPU ms of a process (user + system, clock ticks of 10 ms), from /proc. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** What a round runs: where, which CLI (its worker env) and where the worker's spans go. */
interface RoundSetup {
  space: TestSpace;
  ws: string;
  /** The worker's env that names its CLI: the stand-in, or the real one and its model server. */
  cliEnv: Record<string, string>;
  receiver: OtlpReceiver;
}

/** Runs `turns` turns through a new worker process with the CLI's telemetry on or off: its CPU ms per turn. */
async function round(setup: RoundSetup, cliTelemetry: "on" | "off", turns: number): Promise<number> {
  const redis = redisFor();
  const lane = testSpace();
  const producer = createProducer({ redis, logPrefix: lane.logPrefix, queuePrefix: lane.queuePrefix });
  const worker = await startWorkerProcess({
    REDIS_URL: process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379",
    ...setup.cliEnv,
    TURNSTREAM_WORKSPACE_ROOTS: setup.ws,
    TURNSTREAM_PREFIX: lane.logPrefix,
    TURNSTREAM_QUEUE_PREFIX: lane.queuePrefix,
    TURNSTREAM_INSTANCE_ROOT: setup.space.dir("inst"),
    TURNSTREAM_CONCURRENCY: String(CONCURRENCY),
    TURNSTREAM_TOOL_SANDBOX: "off",
    TURNSTREAM_CLI_TELEMETRY: cliTelemetry,
    OTEL_EXPORTER_OTLP_ENDPOINT: setup.receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    LOG_LEVEL: "info",
  });
  try {
    // One turn first: the worker's lazy start-up (the SDK, the receiver) is not what is measured.
    await queuedRound(producer, 1, () => `prime-${lane.id}`, setup.ws, 120_000);
    const before = cpuMs(worker.pid);
    await queuedRound(producer, turns, (s) => `s${s}-${lane.id}`, setup.ws, 300_000);
    return (cpuMs(worker.pid) - before) / turns;
  } finally {
    worker.kill("SIGTERM");
    await worker.exited;
    await producer.close();
    await cleanupKeys(redis, lane);
    redis.disconnect();
    lane.cleanup();
  }
}

/**
 * CLI spans joined vs off, `rounds` rounds of `turns` turns each, the order alternating. With `real`,
 * the pinned CLI against the scripted model server answers each turn (one model call through the
 * worker's gateway, and the telemetry the real CLI sends for it) instead of the stand-in.
 */
export async function measureCliSpans(turns: number, rounds: number, real = false): Promise<CliSpansResult> {
  const space = testSpace();
  const ws = space.workspace();
  const cli = standInCli(space.dir("bin"));
  const server = real ? await startModelServer({ script: { responses: [] } }) : undefined;
  const cliEnvOf = server
    ? cliEnv(server.url)
    : { ANTHROPIC_API_KEY: "sk-ant-stand-in-dummy-000000", CLAUDE_BIN: cli.path };
  const receiver = await startOtlpReceiver();
  const on: number[] = [];
  const off: number[] = [];
  let cliSpansExported = 0;
  try {
    for (let index = 0; index < rounds; index++) {
      for (const mode of index % 2 === 0 ? (["on", "off"] as const) : (["off", "on"] as const)) {
        const before = receiver.jsonSpanNames().length;
        const perTurn = await round({ space, ws, cliEnv: cliEnvOf, receiver }, mode, turns);
        if (mode === "on") {
          on.push(perTurn);
          cliSpansExported = receiver
            .jsonSpanNames()
            .slice(before)
            .filter((n) => n.startsWith("claude_code.")).length;
        } else off.push(perTurn);
      }
    }
  } finally {
    await receiver.close();
    await server?.close();
    space.cleanup();
  }
  const onMs = median(on);
  const offMs = median(off);
  return {
    cliSpansCpuRatio: Number((onMs / offMs).toFixed(3)),
    onCpuMsPerTurn: Number(onMs.toFixed(2)),
    offCpuMsPerTurn: Number(offMs.toFixed(2)),
    payloadBytes: cli.payloadBytes,
    metricsPayloadBytes: cli.metricsPayloadBytes,
    cliSpansExported,
  };
}
