// A worker's instruments. Counters and histograms come from the events the worker writes, through the
// same observer interface spans use (no second path through the worker); gauges are read when a
// reader collects: CLI slots from the worker, the queue and the decision index from Redis, all in one
// callback bounded by a timeout, so a slow Redis delays no scrape past it.
import type { Attributes, BatchObservableResult, Counter, Histogram, Meter } from "@opentelemetry/api";
import {
  costAdded,
  dataOf,
  WARM_STARTS,
  type AttemptContext,
  type AttemptObserver,
  type EventObserver,
  type ObservedEvent,
} from "../events/index.ts";
import { isObj, numberField, silentLogger, stringField, type Logger } from "../kernel/index.ts";
import { isKnown, type ParsedLine } from "../protocol/index.ts";
import type { CliMetricsSink, Scrubber } from "../telemetry/index.ts";
import { cliTelemetryMetrics } from "./cli-telemetry.ts";
import { fleetGauges, type FleetSources } from "./fleet.ts";
import { counter, gauge, histogram } from "./instruments.ts";
import {
  ABANDON_REASONS,
  ATTEMPT_OUTCOMES,
  bounded,
  ERROR_TYPES,
  GATEWAY_ANSWERS,
  METRICS,
  modelLabel,
  OTHER,
  STATUS_CLASSES,
  tenantLabel,
} from "./names.ts";
import { ConfiguredTenants } from "./tenants.ts";

/** What the gauges read of a running worker. */
export interface ObservedWorker {
  readonly slots: { readonly busy: number; readonly size: number };
  readonly warm: { readonly kept: number };
}

export interface WorkerInstruments {
  /** For the worker's `observers`. */
  readonly observer: EventObserver;
  /** For the worker's `onLogAppend`: one append's duration. */
  readonly onLogAppend: (seconds: number) => void;
  /** Starts the slot gauges on this worker. */
  bindWorker(worker: ObservedWorker): void;
  /** For the worker's `cliMetrics`: the CLIs' own metrics and the receiver's counts. */
  readonly cliMetrics: CliMetricsSink;
}

export interface WorkerInstrumentsOptions extends FleetSources {
  /** Model names pass it before they become a label (a secret-shaped model name becomes "other"). */
  scrubber: Scrubber;
  logger?: Logger;
}

interface EventInstruments {
  turnsEnded: Counter;
  attempts: Counter;
  retries: Counter;
  attemptDuration: Histogram;
  firstLine: Histogram;
  warmStarts: Counter;
  cost: Counter;
  tokens: Histogram;
  gatewayCalls: Counter;
  gatewayTtfb: Histogram;
  label: (model: string | undefined) => string;
  /** A tenant's label (names only configured tenants: see TENANT). */
  tenant: (tenant: string | undefined) => string;
}

const objOf = (v: unknown): Record<string, unknown> | undefined => (isObj(v) ? v : undefined);

const TIMED_OUT_KINDS = new Set(["timeout", "inactivity"]);
const TOKEN_FIELDS = [
  ["input", "input_tokens"],
  ["output", "output_tokens"],
  ["cache_read", "cache_read_input_tokens"],
  ["cache_creation", "cache_creation_input_tokens"],
] as const;

/** Follows one attempt's events; counts its end once, however it ends. */
class AttemptMetrics implements AttemptObserver {
  readonly #i: EventInstruments;
  readonly #attempt: number;
  readonly #model: string;
  readonly #tenant: string | undefined;
  readonly #began = performance.now();
  #startedWritten: number | undefined;
  #firstLineSeen = false;
  #ended = false;
  /**
   * Where the attempt's CLI session's running total stood before it (attempt.started `costBaseUsd`; 0 for a fresh one).
   */
  #costBaseUsd = 0;
  /** The attempt's cost so far, as counted: the rise of the latest result's total_cost_usd over the base. */
  #costUsd = 0;

  constructor(instruments: EventInstruments, context: AttemptContext, model: string) {
    this.#i = instruments;
    this.#attempt = context.attempt;
    this.#model = model;
    this.#tenant = context.tenant;
  }

  onEvent(event: ObservedEvent, parsed?: ParsedLine): void {
    switch (event.kind) {
      case "attempt.started": {
        this.#startedWritten = performance.now();
        this.#costBaseUsd = numberField(objOf(event.data), "costBaseUsd") ?? 0;
        const warm = stringField(objOf(event.data), "warm");
        if (warm !== undefined) this.#i.warmStarts.add(1, { "turnstream.warm.start": bounded(warm, WARM_STARTS) });
        return;
      }
      case "cli.line":
        return this.#line(parsed);
      case "model.call":
        return this.#modelCall(event.data);
      case "attempt.abandoned":
        return this.#abandoned(event.data);
      case "turn.finished":
        this.#turn("finished", undefined);
        return this.#end("finished");
      case "turn.failed": {
        const kind = stringField(objOf(event.data), "errorKind");
        this.#turn(kind !== undefined && TIMED_OUT_KINDS.has(kind) ? "timed_out" : "failed", kind);
        return this.#end("failed");
      }
      case "turn.cancelled":
        this.#turn("cancelled", "cancelled");
        return this.#end("cancelled");
      case "turn.parked":
        // The attempt ended waiting for a decision; its turn is not over.
        return this.#end("parked");
    }
  }

  end(reason: string): void {
    this.#end("abandoned", reason);
  }

  #line(parsed: ParsedLine | undefined): void {
    if (!this.#firstLineSeen && this.#startedWritten !== undefined) {
      this.#firstLineSeen = true;
      this.#i.firstLine.record((performance.now() - this.#startedWritten) / 1000);
    }
    if (parsed === undefined || !isKnown(parsed, "result")) return;
    const line = parsed.line as Record<string, unknown>;
    const model = { "gen_ai.request.model": this.#model };
    // total_cost_usd is the CLI session's running total (a run with background subagents prints two
    // results with the same figure; a resumed session, cold or warm, goes on from its earlier turns):
    // the attempt's cost is its rise over the base, and the counter takes what that adds.
    const total = numberField(line, "total_cost_usd");
    if (total !== undefined && total >= 0) {
      const cost = costAdded(this.#costBaseUsd, total);
      if (cost > this.#costUsd)
        this.#i.cost.add(cost - this.#costUsd, { ...model, "turnstream.tenant": this.#i.tenant(this.#tenant) });
      this.#costUsd = cost;
    }
    const usage = line["usage"];
    if (!isObj(usage)) return;
    for (const [type, field] of TOKEN_FIELDS) {
      const count = numberField(usage, field);
      if (count !== undefined && count >= 0) this.#i.tokens.record(count, { ...model, "gen_ai.token.type": type });
    }
  }

  #modelCall(data: unknown): void {
    const call = dataOf("model.call", data);
    if (call === undefined) return;
    const model = { "gen_ai.request.model": this.#i.label(call.model) };
    const status = call.status >= 200 && call.status < 600 ? `${Math.floor(call.status / 100)}xx` : OTHER;
    const answeredBy = bounded(call.answeredBy ?? "upstream", GATEWAY_ANSWERS);
    this.#i.gatewayCalls.add(1, {
      ...model,
      "turnstream.gateway.status": bounded(status, STATUS_CLASSES),
      "turnstream.gateway.answered_by": answeredBy,
    });
    if (call.ttfbMs !== undefined) this.#i.gatewayTtfb.record(call.ttfbMs / 1000, model);
  }

  #abandoned(data: unknown): void {
    const reason = bounded(stringField(objOf(data), "reason"), ABANDON_REASONS);
    const retry = isObj(data) && data["retry"] === true;
    if (retry) this.#i.retries.add(1, { "error.type": reason });
    // An earlier attempt whose worker died, recorded by this one: counted, but this attempt goes on.
    if (numberField(objOf(data), "attempt") !== this.#attempt) {
      this.#i.attempts.add(1, { "turnstream.attempt.outcome": "abandoned", "turnstream.abandon.reason": reason });
      return;
    }
    this.#end("abandoned", reason);
  }

  #turn(outcome: string, errorKind: string | undefined): void {
    const attrs: Attributes = { "turnstream.turn.outcome": outcome, "turnstream.tenant": this.#i.tenant(this.#tenant) };
    if (errorKind !== undefined || outcome !== "finished") attrs["error.type"] = bounded(errorKind, ERROR_TYPES);
    this.#i.turnsEnded.add(1, attrs);
  }

  #end(outcome: (typeof ATTEMPT_OUTCOMES)[number], reason?: string): void {
    if (this.#ended) return;
    this.#ended = true;
    const attrs: Attributes = { "turnstream.attempt.outcome": outcome };
    if (outcome === "abandoned") attrs["turnstream.abandon.reason"] = bounded(reason, ABANDON_REASONS);
    this.#i.attempts.add(1, attrs);
    this.#i.attemptDuration.record((performance.now() - this.#began) / 1000, { "turnstream.attempt.outcome": outcome });
  }
}

/** Model names as labels; names repeat, so the shape check and the scrubber run once per name. */
function modelLabels(scrubber: Scrubber): (model: string | undefined) => string {
  const models = new Map<string, string>();
  return (model) => {
    let label = models.get(model ?? "");
    if (label === undefined) {
      label = modelLabel(model, (t) => scrubber.scrub(t, { sink: "metric", field: "gen_ai.request.model" }));
      if (models.size < 1000) models.set(model ?? "", label);
    }
    return label;
  };
}

/** Without a list of configured tenants every tenant is "other". */
const NONE_CONFIGURED: ReadonlySet<string> = new Set();
const noConfiguredTenants = (tenant: string | undefined): string => tenantLabel(tenant, NONE_CONFIGURED);

/**
 * The observer that turns a worker's events into counters and histograms; `tenant` gives a turn's
 * tenant label (ConfiguredTenants.label), by default "other" for every tenant.
 */
export function metricsObserver(
  meter: Meter,
  scrubber: Scrubber,
  tenant: (tenant: string | undefined) => string = noConfiguredTenants,
): EventObserver {
  const instruments: EventInstruments = {
    turnsEnded: counter(meter, METRICS.turnsEnded),
    attempts: counter(meter, METRICS.attempts),
    retries: counter(meter, METRICS.retries),
    attemptDuration: histogram(meter, METRICS.attemptDuration),
    firstLine: histogram(meter, METRICS.cliFirstLineDuration),
    warmStarts: counter(meter, METRICS.warmStarts),
    cost: counter(meter, METRICS.cost),
    tokens: histogram(meter, METRICS.tokenUsage),
    gatewayCalls: counter(meter, METRICS.gatewayCalls),
    gatewayTtfb: histogram(meter, METRICS.gatewayTtfb),
    label: modelLabels(scrubber),
    tenant,
  };
  const label = instruments.label;
  return { attempt: (context) => new AttemptMetrics(instruments, context, label(context.requestModel)) };
}

/** Every instrument of a worker on `meter`. */
export function workerInstruments(meter: Meter, options: WorkerInstrumentsOptions): WorkerInstruments {
  const appendDuration = histogram(meter, METRICS.logAppendDuration);
  fleetGauges(meter, options, options.logger ?? silentLogger);
  const usage = gauge(meter, METRICS.cliSlotsUsage);
  const limit = gauge(meter, METRICS.cliSlotsLimit);
  const kept = gauge(meter, METRICS.warmKept);
  const tenants = new ConfiguredTenants({ redis: options.redis, logPrefix: options.logPrefix, logger: options.logger });
  return {
    observer: metricsObserver(meter, options.scrubber, (tenant) => tenants.label(tenant)),
    onLogAppend: (seconds) => appendDuration.record(seconds),
    cliMetrics: cliTelemetryMetrics(meter),
    bindWorker(worker) {
      meter.addBatchObservableCallback(
        (observation: BatchObservableResult) => {
          observation.observe(usage, worker.slots.busy);
          observation.observe(limit, worker.slots.size);
          observation.observe(kept, worker.warm.kept);
        },
        [usage, limit, kept],
      );
    },
  };
}
