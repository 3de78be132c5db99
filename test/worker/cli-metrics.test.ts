// The CLI's own metrics through the worker, real CLI, one stage and two workers in turn. The first
// keeps metrics (pushed over OTLP/HTTP JSON to a real receiver) and does not trace: two turns of one
// session edit files with the CLI's Edit tool, and the worker's lines-of-code counter must equal what
// `diff` counts between the files before and after, added up over both turns. A tool of the third turn
// plays the attacker with the token its CLI's env holds: a metrics post with secret and
// high-cardinality attributes, an unknown metric, and a post without a token. The second worker traces
// but keeps no metrics: its CLI is told OTEL_METRICS_EXPORTER=none.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { spawnSync } from "node:child_process";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { METRICS, startMetrics, workerInstruments, type Metrics } from "../../src/metrics/index.ts";
import { createScrubber, startTelemetry, type Telemetry } from "../../src/telemetry/index.ts";
import { startOtlpReceiver, type OtlpReceiver } from "../telemetry/otlp-receiver.ts";
import { cliEnviron, forgePrelude } from "./_cli-environ.ts";
import { rig, type Rig } from "./_more.ts";

const secret = `ghp_${randomBytes(27)
  .toString("base64url")
  .replace(/[^A-Za-z0-9]/g, "a")
  .slice(0, 36)}`;
const FORGED_SERIES = 300;

const edit = (file: string, oldText: string, newText: string, match: string): Record<string, unknown> => ({
  match,
  content: [{ type: "tool_use", name: "Edit", input: { file_path: file, old_string: oldText, new_string: newText } }],
});
const bash = (command: string, match: string): Record<string, unknown> => ({
  match,
  content: [{ type: "tool_use", name: "Bash", input: { command, description: "run it" } }],
});
const text = (reply: string, match: string): Record<string, unknown> => ({
  match,
  content: [{ type: "text", text: reply }],
});

// A tool of the run posts forged metrics with the token it finds in its CLI's env.
const FORGE =
  forgePrelude("forge") +
  String.raw`url="$(cli OTEL_EXPORTER_OTLP_ENDPOINT)/v1/metrics"
post() { curl -s -o /dev/null -w '%{http_code}' -H 'Expect:' -H "content-type: application/json" "$@"; echo; }
printf 'forge token='; post -H "Authorization: Bearer $tok" --data-binary @forged-metrics.json "$url"
printf 'forge no-token='; post --data-binary @forged-metrics.json "$url"
`;

/** A metrics request a tool forges: secret values and ids in attributes, many series, an unknown metric. */
function forgedMetrics(): string {
  const attribute = (key: string, value: string) => ({ key, value: { stringValue: value } });
  const decisions = Array.from({ length: FORGED_SERIES }, (_, index) => ({
    attributes: [
      attribute("tool_name", "Edit"),
      attribute("decision", "accept"),
      attribute("language", `lang-${index}-${secret}`),
      attribute("session.id", `session-${index}`),
      attribute(`x.${index}`, secret),
    ],
    startTimeUnixNano: "1",
    timeUnixNano: "2",
    asDouble: 1,
  }));
  const sum = (dataPoints: unknown[]) => ({ aggregationTemporality: 1, isMonotonic: true, dataPoints });
  const lines = [{ attributes: [attribute("type", secret), attribute("user.email", secret)], asDouble: 1000 }];
  return JSON.stringify({
    resourceMetrics: [
      {
        resource: { attributes: [attribute("service.name", secret)] },
        scopeMetrics: [
          {
            scope: { name: "forged" },
            metrics: [
              { name: "claude_code.code_edit_tool.decision", sum: sum(decisions) },
              { name: "claude_code.lines_of_code.count", sum: sum(lines) },
              { name: `forged.${secret}`, sum: sum([{ asDouble: 1 }]) },
            ],
          },
        ],
      },
    ],
  });
}

interface Point {
  attributes: Record<string, string>;
  value: number;
}

/** A data point as the worker's OTLP/JSON exporter writes it. */
interface PushedPoint {
  attributes?: Array<{ key: string; value: Record<string, unknown> }>;
  asDouble?: number;
  asInt?: number | string;
}

/** The worker's latest pushed value of each series of `name` (its exporter sends cumulative sums). */
function pushedPoints(receiver: OtlpReceiver, name: string): Point[] {
  type Body = {
    resourceMetrics?: Array<{
      scopeMetrics?: Array<{
        metrics?: Array<{
          name: string;
          sum?: { dataPoints: PushedPoint[] };
        }>;
      }>;
    }>;
  };
  const requests = receiver.requests.filter((q) => q.path === "/v1/metrics");
  const latest = requests.at(-1)?.json as Body | undefined;
  const points: Point[] = [];
  for (const resource of latest?.resourceMetrics ?? [])
    for (const scope of resource.scopeMetrics ?? [])
      for (const metric of scope.metrics ?? []) {
        if (metric.name !== name) continue;
        for (const point of metric.sum?.dataPoints ?? []) {
          const attributes = Object.fromEntries(
            (point.attributes ?? []).map((a) => [a.key, String(Object.values(a.value)[0])]),
          );
          points.push({ attributes, value: Number(point.asDouble ?? point.asInt) });
        }
      }
  return points;
}

const valueOf = (points: Point[], where: Record<string, string> = {}): number =>
  points
    .filter((p) => Object.entries(where).every(([key, value]) => p.attributes[key] === value))
    .reduce((sum, p) => sum + p.value, 0);

/** Lines `diff` finds removed from `before` and added in `after`: a count of its own, not the CLI's. */
function diffCount(before: string, after: string): { added: number; removed: number } {
  const out = spawnSync("diff", [before, after], { encoding: "utf8" }).stdout.split("\n");
  return { added: out.filter((l) => l.startsWith("> ")).length, removed: out.filter((l) => l.startsWith("< ")).length };
}

let stage: Rig;
let receiver: OtlpReceiver;
let metrics: Metrics;
let telemetry: Telemetry;

async function runTurn(prompt: string, session?: string): Promise<{ session: string; turn: string }> {
  const queued = await stage.producer.enqueueTurn({
    prompt,
    cwd: stage.ws,
    session,
    options: { skipPermissions: true },
  });
  const result = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 120_000 });
  assert.equal(result.status, "finished", JSON.stringify(result.event.data));
  return queued;
}

before(async () => {
  receiver = await startOtlpReceiver();
  stage = await rig((ws: string) => ({
    responses: [
      edit(join(ws, "a.ts"), "two\nthree\n", "TWO\nTHREE\nextra\n", "first edit"),
      text("edited a", "a.ts"),
      edit(join(ws, "b.md"), "alpha\nbeta\ngamma\n", "ALPHA\n", "second edit"),
      text("edited b", "b.md"),
      bash("sh forge.sh forge; echo marker-forge", "forge turn"),
      text("forged", "marker-forge"),
      bash("sh forge.sh off; echo marker-off", "off turn"),
      text("off done", "marker-off"),
    ],
  }));
  writeFileSync(join(stage.ws, "forge.sh"), FORGE);
  writeFileSync(join(stage.ws, "forged-metrics.json"), forgedMetrics());
  writeFileSync(join(stage.ws, "a.ts"), "one\ntwo\nthree\nfour\n");
  writeFileSync(join(stage.ws, "b.md"), "# title\nalpha\nbeta\ngamma\nend\n");
  for (const file of ["a.ts", "b.md"]) copyFileSync(join(stage.ws, file), join(stage.ws, `${file}.before`));
  metrics = startMetrics({
    env: {
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `${receiver.url}/v1/metrics`,
      OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: "http/json",
      OTEL_METRIC_EXPORT_INTERVAL: "600000",
    },
    scrubber: createScrubber({ env: {} }),
    opsEndpoint: false,
    instanceId: "cli-metrics-test",
  });
  telemetry = startTelemetry({
    scrubber: createScrubber({ env: {} }),
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" },
  });
});

after(async () => {
  await stage.dispose();
  await metrics.shutdown();
  await telemetry.shutdown();
  await receiver.close();
});

test("the CLI's metrics: lines of code as diff counts them over two turns; a tool's forged post stays bounded", async () => {
  const instruments = workerInstruments(metrics.meter, {
    scrubber: createScrubber({ env: {} }),
    redis: stage.redis,
    logPrefix: stage.space.logPrefix,
  });
  const worker = stage.worker({
    sandboxed: true,
    toolSandbox: { mode: "off" },
    observers: [instruments.observer],
    cliMetrics: instruments.cliMetrics,
  });
  const first = await runTurn("first edit please");
  await runTurn("second edit please", first.session);
  await runTurn("forge turn", first.session);
  await worker.close({ graceMs: 5000 });
  await metrics.forceFlush();

  const inTs = diffCount(join(stage.ws, "a.ts.before"), join(stage.ws, "a.ts"));
  const inMd = diffCount(join(stage.ws, "b.md.before"), join(stage.ws, "b.md"));
  assert.ok(inTs.added > 0 && inMd.removed > 0, "both edits changed their files");
  const lines = pushedPoints(receiver, METRICS.cliLinesOfCode.name);
  assert.equal(valueOf(lines, { "turnstream.cli.lines.type": "added" }), inTs.added + inMd.added);
  assert.equal(valueOf(lines, { "turnstream.cli.lines.type": "removed" }), inTs.removed + inMd.removed);
  assert.equal(valueOf(lines, { "turnstream.cli.lines.type": "other" }), 1000, "the forged type is 'other'");

  const decisions = pushedPoints(receiver, METRICS.cliCodeEditDecisions.name);
  const accepted = { "gen_ai.tool.name": "Edit", "turnstream.cli.edit.decision": "accept" };
  assert.equal(valueOf(decisions, { ...accepted, "turnstream.cli.edit.language": "TypeScript" }), 1);
  assert.equal(valueOf(decisions, { ...accepted, "turnstream.cli.edit.language": "Markdown" }), 1);
  assert.equal(valueOf(decisions, { ...accepted, "turnstream.cli.edit.language": "other" }), FORGED_SERIES);
  assert.ok(decisions.length <= 4, `the forged series folded into few: ${JSON.stringify(decisions)}`);
  for (const point of [...lines, ...decisions])
    for (const key of Object.keys(point.attributes))
      assert.ok(key in METRICS.cliLinesOfCode.attributes || key in METRICS.cliCodeEditDecisions.attributes, key);
  assert.ok(pushedPoints(receiver, METRICS.cliActiveTime.name).length > 0, "active time is kept");

  // The receiver's own counts: the forged unknown metric, the post without a token.
  const counts = pushedPoints(receiver, METRICS.cliTelemetryMetricPoints.name);
  assert.equal(valueOf(counts, { "turnstream.cli_telemetry.result": "unknown" }), 1);
  assert.ok(valueOf(counts, { "turnstream.cli_telemetry.result": "not_kept" }) >= 3, "sessions, tokens, cost");
  assert.ok(valueOf(counts, { "turnstream.cli_telemetry.result": "recorded" }) >= FORGED_SERIES + 4);
  assert.equal(valueOf(pushedPoints(receiver, METRICS.cliTelemetryUnauthorized.name)), 1);
  const toModel = JSON.stringify(stage.server.requests().map((q) => q.messages));
  assert.match(toModel, /forge token=200/);
  assert.match(toModel, /forge no-token=401/);

  // Metrics only (the worker does not trace): no spans asked for, metrics in delta.
  const environ = cliEnviron(stage.ws, "forge");
  assert.equal(environ.get("OTEL_METRICS_EXPORTER"), "otlp");
  assert.equal(environ.get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"), "delta");
  assert.equal(environ.get("OTEL_TRACES_EXPORTER"), "none");
  assert.equal(environ.get("TRACEPARENT"), undefined);
  const pushed = receiver.requests.map((q) => q.bodyText);
  assert.ok(!pushed.some((body) => body.includes(secret)), "the forged secret is in nothing the worker sent");
  assert.ok(!pushed.some((body) => body.includes("session-1")), "no forged id either");
});

test("metrics off in the worker: its CLI is told OTEL_METRICS_EXPORTER=none (spans still on)", async () => {
  const worker = stage.worker({ telemetry, sandboxed: true, toolSandbox: { mode: "off" } });
  await runTurn("off turn");
  await worker.close({ graceMs: 5000 });
  const environ = cliEnviron(stage.ws, "off");
  assert.equal(environ.get("OTEL_METRICS_EXPORTER"), "none");
  assert.equal(environ.get("OTEL_TRACES_EXPORTER"), "otlp");
  assert.equal(environ.get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"), undefined);
});
