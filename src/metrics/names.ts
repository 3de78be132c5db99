// The one table of turnstream's metric instruments: what each measures, its unit and the attributes
// (labels) it carries, with every attribute's value set fixed or checked. Dashboards, alerts, the
// deploy manifests and the tests read names from here; nothing else spells a metric name.
//
// Names follow the OpenTelemetry semantic conventions where one exists (`gen_ai.client.token.usage`,
// `error.type`, `gen_ai.request.model`, `gen_ai.token.type`; seconds as `s`, counts as `{thing}`),
// else a `turnstream.` namespace. No attribute holds prompt text, session or turn ids, or any other
// unbounded value: every value is in the listed set, or passes a shape check, else it is "other".

import { FAILURE_KINDS, WARM_STARTS } from "../events/index.ts";
import { QUEUE_STATES } from "../queue/index.ts";
import { cliMetricAttributes } from "../telemetry/index.ts";

/** OpenTelemetry instrument kinds turnstream uses (gauges are observable: read when collected). */
export type InstrumentKind = "counter" | "histogram" | "gauge";

export interface MetricDef {
  /** OpenTelemetry instrument name. */
  readonly name: string;
  readonly kind: InstrumentKind;
  /** UCUM unit: `s`, `USD`, or a `{annotation}` count. */
  readonly unit: string;
  readonly description: string;
  /**
   * Attribute keys and their allowed values; `MODEL` marks a model name (shape-checked, else "other"),
   * `TENANT` a tenant (a configured one's name, else "other"; "none" without one).
   */
  readonly attributes: Readonly<Record<string, readonly string[] | typeof MODEL | typeof TENANT>>;
  /** Histogram bucket boundaries (in the unit). */
  readonly buckets?: readonly number[];
  /**
   * Fleet-wide: every process that can see it reports the same value (read from Redis), so a
   * dashboard aggregates it with `max` across instances, never `sum`.
   */
  readonly fleetWide?: true;
}

/** Marks a model-name attribute: values pass `modelLabel` (shape check, scrubbed), else "other". */
export const MODEL = "model" as const;

/** The value used for anything outside an attribute's set. */
export const OTHER = "other";

/**
 * Marks a tenant attribute: a tenant's name only when an operator configured the tenant (set its
 * limits), at most MAX_TENANT_LABELS of them; any other tenant is "other", a turn without one NO_TENANT.
 * Tenants come and go with customers and repositories: a label per tenant seen would grow without bound.
 */
export const TENANT = "tenant" as const;
/** The tenant attribute of a turn that names no tenant. */
export const NO_TENANT = "none";
/** Most configured tenants that get a value of their own (the first by name); the rest are "other". */
export const MAX_TENANT_LABELS = 100;

export const TURN_OUTCOMES = ["finished", "failed", "cancelled", "timed_out"] as const;
export const ATTEMPT_OUTCOMES = ["finished", "failed", "cancelled", "abandoned", "parked"] as const;
export const TOKEN_TYPES = ["input", "output", "cache_read", "cache_creation"] as const;

/**
 * Error kinds turnstream records: the failure table's (src/events/failures.ts), plus "cancelled" for a
 * turn ended by a cancel. Anything else is "other".
 */
export const ERROR_TYPES = ["cancelled", ...FAILURE_KINDS, OTHER] as const;

/** A gateway call's HTTP status, by class. */
export const STATUS_CLASSES = ["2xx", "3xx", "4xx", "5xx", OTHER] as const;
/** Who answered a gateway call: the upstream, or the gateway itself and why. */
export const GATEWAY_ANSWERS = ["upstream", "policy", "upstream_unreachable", "too_large", "aborted", OTHER] as const;

/** Why an attempt was abandoned: a retryable error kind, or the reason the worker stopped it. */
export const ABANDON_REASONS = [
  ...ERROR_TYPES,
  "worker_crashed",
  "lease_lost",
  "lock_lost",
  "shutdown",
  "fenced",
  "log_rolled_back",
] as const;

/** What became of a span the CLI posted to the worker's receiver. */
export const CLI_SPAN_RESULTS = ["forwarded", "refused"] as const;
/**
 * What became of a metric point the CLI posted: recorded into a worker instrument, not kept (a
 * metric the worker counts itself), unknown (not on the allow-list), refused (malformed, too many series).
 */
export const CLI_POINT_RESULTS = ["recorded", "not_kept", "unknown", "refused"] as const;

const SECONDS_SHORT = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

/** Every instrument, by the key the code uses. */
export const METRICS = {
  queueDepth: {
    name: "turnstream.queue.depth",
    kind: "gauge",
    unit: "{turn}",
    description: "Jobs in the turn queue by state (fleet-wide: aggregate with max)",
    attributes: { "turnstream.queue.state": QUEUE_STATES },
    fleetWide: true,
  },
  queueOldestWaitAge: {
    name: "turnstream.queue.oldest_wait.age",
    kind: "gauge",
    unit: "s",
    description: "How long the oldest waiting job has waited (0 when none waits; fleet-wide: aggregate with max)",
    attributes: {},
    fleetWide: true,
  },
  turnsEnded: {
    name: "turnstream.turns.ended",
    kind: "counter",
    unit: "{turn}",
    description: "Turns this process ended, by outcome; error.type is the failure's errorKind",
    attributes: { "turnstream.turn.outcome": TURN_OUTCOMES, "error.type": ERROR_TYPES, "turnstream.tenant": TENANT },
  },
  attempts: {
    name: "turnstream.attempts",
    kind: "counter",
    unit: "{attempt}",
    description: "Attempts this process ended, by outcome; turnstream.abandon.reason for abandoned ones",
    attributes: { "turnstream.attempt.outcome": ATTEMPT_OUTCOMES, "turnstream.abandon.reason": ABANDON_REASONS },
  },
  retries: {
    name: "turnstream.retries",
    kind: "counter",
    unit: "{attempt}",
    description: "Attempts abandoned to be retried, by the error that made them retry",
    attributes: { "error.type": ABANDON_REASONS },
  },
  attemptDuration: {
    name: "turnstream.attempt.duration",
    kind: "histogram",
    unit: "s",
    description: "From attempt.started to the attempt's end, by outcome",
    attributes: { "turnstream.attempt.outcome": ATTEMPT_OUTCOMES },
    buckets: [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600],
  },
  cliFirstLineDuration: {
    name: "turnstream.cli.first_line.duration",
    kind: "histogram",
    unit: "s",
    description: "From the attempt's start to the CLI's first stdout line (CLI start-up and the model's first answer)",
    attributes: {},
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60],
  },
  warmStarts: {
    name: "turnstream.warm.starts",
    kind: "counter",
    unit: "{attempt}",
    description:
      "Warm-mode attempts by how their CLI process came about: warm (a kept process answered) or why a new one started",
    attributes: { "turnstream.warm.start": WARM_STARTS },
  },
  warmKept: {
    name: "turnstream.warm.kept",
    kind: "gauge",
    unit: "{process}",
    description: "Idle CLI processes this worker keeps for warm sessions' next turns",
    attributes: {},
  },
  cliSlotsUsage: {
    name: "turnstream.cli.slots.usage",
    kind: "gauge",
    unit: "{slot}",
    description: "CLI slots in use in this worker",
    attributes: {},
  },
  cliSlotsLimit: {
    name: "turnstream.cli.slots.limit",
    kind: "gauge",
    unit: "{slot}",
    description: "CLI slots this worker has (its concurrency)",
    attributes: {},
  },
  cost: {
    name: "turnstream.cost",
    kind: "counter",
    unit: "USD",
    description: "Cost the CLI reported in its result lines, every attempt's (retried ones too)",
    attributes: { "gen_ai.request.model": MODEL, "turnstream.tenant": TENANT },
  },
  tokenUsage: {
    name: "gen_ai.client.token.usage",
    kind: "histogram",
    unit: "{token}",
    description: "Tokens per CLI result, by token type",
    attributes: { "gen_ai.token.type": TOKEN_TYPES, "gen_ai.request.model": MODEL },
    buckets: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864],
  },
  gatewayCalls: {
    name: "turnstream.gateway.calls",
    kind: "counter",
    unit: "{call}",
    description:
      "Model calls through the worker's gateway, by status class and who answered (the upstream, or the gateway: policy, unreachable upstream, too large, client gone)",
    attributes: {
      "turnstream.gateway.status": STATUS_CLASSES,
      "turnstream.gateway.answered_by": GATEWAY_ANSWERS,
      "gen_ai.request.model": MODEL,
    },
  },
  gatewayTtfb: {
    name: "turnstream.gateway.ttfb",
    kind: "histogram",
    unit: "s",
    description: "Time from a model request's arrival at the gateway to the answer's first byte",
    attributes: { "gen_ai.request.model": MODEL },
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
  },
  decisionsPending: {
    name: "turnstream.decisions.pending",
    kind: "gauge",
    unit: "{request}",
    description:
      "Supervised decisions waiting for an operator, parked turns' requests included until decided (fleet-wide: aggregate with max)",
    attributes: {},
    fleetWide: true,
  },
  decisionsOldestPendingAge: {
    name: "turnstream.decisions.oldest_pending.age",
    kind: "gauge",
    unit: "s",
    description: "How long the oldest pending decision has waited (0 when none; fleet-wide: aggregate with max)",
    attributes: {},
    fleetWide: true,
  },
  turnsParked: {
    name: "turnstream.turns.parked",
    kind: "gauge",
    unit: "{turn}",
    description:
      "Turns parked on a supervised call, holding nothing until it is decided or its deadline passes; decided ones count until a worker resumes them (fleet-wide: aggregate with max)",
    attributes: {},
    fleetWide: true,
  },
  turnsOldestParkedAge: {
    name: "turnstream.turns.oldest_parked.age",
    kind: "gauge",
    unit: "s",
    description:
      "How long the oldest parked turn has waited, since its request (0 when none is parked; fleet-wide: aggregate with max)",
    attributes: {},
    fleetWide: true,
  },
  gatewayCooldowns: {
    name: "turnstream.gateway.cooldowns",
    kind: "gauge",
    unit: "{credential}",
    description:
      "Model credentials the API answered 429, 529 or 503 whose requests every worker's gateway holds now, until their cooldown ends and a probe succeeds (fleet-wide: aggregate with max)",
    attributes: {},
    fleetWide: true,
  },
  cliLinesOfCode: {
    name: "turnstream.cli.lines_of_code",
    kind: "counter",
    unit: "{line}",
    description: "Lines the CLI's edit tools added or removed, as the CLI counts them",
    attributes: cliMetricAttributes("cliLinesOfCode"),
  },
  cliCommits: {
    name: "turnstream.cli.commits",
    kind: "counter",
    unit: "{commit}",
    description: "Git commits the CLI created",
    attributes: cliMetricAttributes("cliCommits"),
  },
  cliPullRequests: {
    name: "turnstream.cli.pull_requests",
    kind: "counter",
    unit: "{pull_request}",
    description: "Pull requests the CLI created",
    attributes: cliMetricAttributes("cliPullRequests"),
  },
  cliCodeEditDecisions: {
    name: "turnstream.cli.code_edit_decisions",
    kind: "counter",
    unit: "{decision}",
    description:
      "Permission decisions on the CLI's edit tools, by tool, decision, what decided it and the file's language",
    attributes: cliMetricAttributes("cliCodeEditDecisions"),
  },
  cliActiveTime: {
    name: "turnstream.cli.active_time",
    kind: "counter",
    unit: "s",
    description: "Time the CLI was active, by type: cli (the CLI working) or user (input)",
    attributes: cliMetricAttributes("cliActiveTime"),
  },
  cliTelemetrySpans: {
    name: "turnstream.cli_telemetry.spans",
    kind: "counter",
    unit: "{span}",
    description:
      "Spans the CLIs posted to the worker's receiver with a live token: forwarded to the worker's exporter, or refused (another trace, malformed)",
    attributes: { "turnstream.cli_telemetry.result": CLI_SPAN_RESULTS },
  },
  cliTelemetryMetricPoints: {
    name: "turnstream.cli_telemetry.metric_points",
    kind: "counter",
    unit: "{point}",
    description:
      "Metric points the CLIs posted to the worker's receiver with a live token: recorded, not kept, unknown or refused",
    attributes: { "turnstream.cli_telemetry.result": CLI_POINT_RESULTS },
  },
  cliTelemetryUnauthorized: {
    name: "turnstream.cli_telemetry.unauthorized",
    kind: "counter",
    unit: "{request}",
    description: "Requests to the worker's CLI telemetry receiver without a live token (forged or late posts)",
    attributes: {},
  },
  projectorLag: {
    name: "turnstream.projector.lag",
    kind: "gauge",
    unit: "{event}",
    description: "Events appended to followed sessions that this projector has not committed yet",
    attributes: {},
  },
  logAppendDuration: {
    name: "turnstream.log.append.duration",
    kind: "histogram",
    unit: "s",
    description: "One append to the event log: the Redis round trip and script, retries included",
    attributes: {},
    buckets: SECONDS_SHORT,
  },
} as const satisfies Record<string, MetricDef>;

/**
 * The name the OpenTelemetry Prometheus exporter (`@opentelemetry/exporter-prometheus`) gives an
 * instrument: characters outside `[a-zA-Z0-9_]` become `_` (runs collapse to one), and a monotonic
 * counter gets `_total`. This exporter adds no unit suffix (`_seconds`), so neither does this;
 * a collector's Prometheus exporter may (test/metrics checks the real exporter's output).
 * Histograms expose `<name>_bucket`, `<name>_sum` and `<name>_count`.
 */
export function prometheusName(def: Pick<MetricDef, "name" | "kind">): string {
  const base = prometheusLabel(def.name);
  return def.kind === "counter" && !base.endsWith("_total") ? `${base}_total` : base;
}

/** An attribute key as a Prometheus label name (`error.type` → `error_type`). */
export function prometheusLabel(key: string): string {
  return key.replace(/[^a-zA-Z0-9_]/g, "_").replace(/_{2,}/g, "_");
}

// Model ids look like `claude-sonnet-4-5`, `claude-3-5-haiku-20241022` or a provider's
// `us.anthropic.claude-…-v1:0`: short, lowercase, no spaces. Anything else is not a label.
const MODEL_SHAPE = /^[a-z0-9][a-z0-9._:@/-]{0,79}$/;

/**
 * A model name as a label value: the value when it has a model id's shape and the scrubber leaves it
 * alone, "default" when the turn named none, else "other".
 */
export function modelLabel(model: string | undefined, scrub?: (text: string) => string): string {
  if (model === undefined || model === "") return "default";
  if (!MODEL_SHAPE.test(model)) return OTHER;
  if (scrub !== undefined && scrub(model) !== model) return OTHER;
  return model;
}

/**
 * A tenant as a label value: its name when it is one of `configured`, "other" when it is not, NO_TENANT
 * when the turn names none.
 */
export function tenantLabel(tenant: string | undefined, configured: ReadonlySet<string>): string {
  if (tenant === undefined) return NO_TENANT;
  return configured.has(tenant) ? tenant : OTHER;
}

/** `value` when it is in the set, else "other". */
export function bounded<T extends string>(value: string | undefined, set: readonly T[]): T | typeof OTHER {
  return value !== undefined && (set as readonly string[]).includes(value) ? (value as T) : OTHER;
}
