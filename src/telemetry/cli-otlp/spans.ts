// The CLI's spans, from an OTLP/JSON ExportTraceServiceRequest to ReadableSpans the worker's span
// processors take: each span checked against the trace its token was given, moved under the attempt
// it belongs to, and its attributes passed through the allow-list (attributes.ts) and the run's
// scrubber. Attribute walking is one plain loop per span: this runs for every span every CLI sends.
import { SpanKind, SpanStatusCode, type Attributes, type AttributeValue, type HrTime } from "@opentelemetry/api";
import { resourceFromAttributes, type Resource } from "@opentelemetry/resources";
import type { ReadableSpan, TimedEvent } from "@opentelemetry/sdk-trace-base";
import { isObj } from "../../kernel/index.ts";
import { capText } from "../../protocol/index.ts";
import { finishedSpan } from "../finished-span.ts";
import type { Scrubber } from "../scrub.ts";
import {
  CLI_SERVICE_NAME,
  CONTENT_ATTRIBUTES,
  FACT_ATTRIBUTES,
  MAX_ARRAY_ITEMS,
  MAX_CONTENT_CHARS,
  MAX_EVENTS_PER_SPAN,
  MAX_FACT_CHARS,
  MAX_RESOURCE_CHARS,
  MAX_SPANS_PER_REQUEST,
  plainName,
  RESOURCE_ATTRIBUTES,
} from "./attributes.ts";

/** One attempt a CLI process's spans may belong to. */
export interface AttemptBinding {
  /** The attempt span's ids: the trace the spans go into and their new parent. */
  readonly traceId: string;
  readonly spanId: string;
  /** When the attempt started (ms): spans that started after it and before the next binding are its. */
  readonly startMs: number;
  /** The run's scrubber (it knows the run's secret values and the token). */
  readonly scrubber: Scrubber;
}

/** Where one token's spans go. */
export interface SpanRoute {
  /** The span TRACEPARENT named in the CLI's env: its trace is the only one the token may post into. */
  readonly process: { readonly traceId: string; readonly spanId: string };
  /** The attempt a span that started at `startMs` belongs to; undefined when none is bound yet. */
  bindingFor(startMs: number): AttemptBinding | undefined;
  /** Keep content attributes (scrubbed, capped). */
  readonly content: boolean;
}

export interface ConvertedSpans {
  spans: ReadableSpan[];
  /** Spans refused: another trace, malformed ids or times, a name that is not a plain name, too many. */
  refused: number;
}

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const VERSION = /^[0-9][0-9A-Za-z.+-]{0,31}$/;

/** The spans of one request (its parsed JSON body), converted; what does not pass is counted, never sent. */
export function cliSpans(body: unknown, route: SpanRoute): ConvertedSpans {
  const out: ConvertedSpans = { spans: [], refused: 0 };
  const scrubs = new Map<AttemptBinding, ValueScrub>();
  // The spans of a request repeat most values (model, session id, tool names): each is scrubbed once.
  const scrubFor = (binding: AttemptBinding): ValueScrub => {
    let scrub = scrubs.get(binding);
    if (scrub === undefined) scrubs.set(binding, (scrub = valueScrubber(binding.scrubber, route.content)));
    return scrub;
  };
  let seen = 0;
  for (const resourceSpans of arrayField(body, "resourceSpans")) {
    const resource = cliResource(resourceSpans);
    for (const scopeSpans of arrayField(resourceSpans, "scopeSpans")) {
      const scope = instrumentationScope(scopeSpans);
      for (const raw of arrayField(scopeSpans, "spans")) {
        const span =
          ++seen > MAX_SPANS_PER_REQUEST ? undefined : convertSpan(raw, route, { resource, scope, scrubFor });
        if (span === undefined) out.refused++;
        else out.spans.push(span);
      }
    }
  }
  return out;
}

/** An OTLP/JSON list field (`resourceSpans`, `dataPoints`, …); empty when it is missing or not a list. */
export function arrayField(value: unknown, key: string): unknown[] {
  const field = isObj(value) ? value[key] : undefined;
  return Array.isArray(field) ? field : [];
}

// A CLI sends the same resource every time: one Resource object per distinct one, so the redacting
// exporter scrubs it once (it caches by object) and an export batch groups the CLIs' spans under it.
const resources = new Map<string, Resource>();
const MAX_RESOURCES = 64;

/**
 * The resource's allow-listed attributes, short ones only, under the CLI's service name; names are
 * fixed and values scrubbed by the exporter.
 */
function cliResource(resourceSpans: unknown): Resource {
  const resource = isObj(resourceSpans) ? resourceSpans["resource"] : undefined;
  const attributes: Attributes = {};
  for (const item of arrayField(resource, "attributes")) {
    if (!isObj(item) || typeof item["key"] !== "string" || !RESOURCE_ATTRIBUTES.has(item["key"])) continue;
    const value = attributeValue(item["value"]);
    if (typeof value === "string" && value.length <= MAX_RESOURCE_CHARS) attributes[item["key"]] = value;
  }
  attributes["service.name"] = CLI_SERVICE_NAME;
  const key = JSON.stringify(attributes);
  let known = resources.get(key);
  if (known === undefined) {
    if (resources.size >= MAX_RESOURCES) resources.clear();
    known = resourceFromAttributes(attributes);
    resources.set(key, known);
  }
  return known;
}

function instrumentationScope(scopeSpans: unknown): { name: string; version?: string } {
  const scope = isObj(scopeSpans) ? scopeSpans["scope"] : undefined;
  const name = isObj(scope) && plainName(scope["name"]) ? scope["name"] : "claude_code";
  const version = isObj(scope) ? scope["version"] : undefined;
  return typeof version === "string" && VERSION.test(version) ? { name, version } : { name };
}

/** What the spans of one scope share. */
interface SpanSource {
  resource: Resource;
  scope: { name: string; version?: string };
  scrubFor(binding: AttemptBinding): ValueScrub;
}

function convertSpan(raw: unknown, route: SpanRoute, source: SpanSource): ReadableSpan | undefined {
  if (!isObj(raw) || !plainName(raw["name"])) return undefined;
  const { traceId, spanId } = raw;
  const parentSpanId = raw["parentSpanId"] ?? "";
  // A process given no trace (the worker does not trace) has an empty one: no span's trace id matches.
  if (typeof traceId !== "string" || !HEX32.test(traceId) || traceId !== route.process.traceId) return undefined;
  if (typeof spanId !== "string" || !HEX16.test(spanId)) return undefined;
  if (typeof parentSpanId !== "string" || (parentSpanId !== "" && !HEX16.test(parentSpanId))) return undefined;
  if (spanId === parentSpanId || spanId === route.process.spanId) return undefined;
  const startTime = hrTimeOf(raw["startTimeUnixNano"]);
  const endTime = hrTimeOf(raw["endTimeUnixNano"]);
  if (startTime === undefined || endTime === undefined) return undefined;
  const binding = route.bindingFor(startTime[0] * 1000 + startTime[1] / 1e6);
  // A span under the attempt span's own id would stand in for the worker's span in the trace.
  if (binding === undefined || spanId === binding.spanId) return undefined;
  const scrub = source.scrubFor(binding);
  // The CLI's top span names the process's TRACEPARENT span: under a kept process's later turns it
  // moves to that turn's attempt span. A span with no parent hangs under the attempt too.
  const parent = parentSpanId === "" || parentSpanId === route.process.spanId ? binding.spanId : parentSpanId;
  return finishedSpan({
    name: raw["name"],
    kind: spanKindOf(raw["kind"]),
    traceId: binding.traceId,
    spanId,
    parentSpanId: parent,
    startTime,
    endTime,
    status: statusOf(raw["status"], scrub),
    attributes: filteredAttributes(raw["attributes"], scrub),
    events: spanEvents(raw["events"], scrub),
    resource: source.resource,
    instrumentationScope: source.scope,
  });
}

/**
 * Scrubs a kept value: facts as they are (a longer one than MAX_FACT_CHARS is dropped), content
 * capped after scrubbing (a cut first could leave half a secret no pattern knows); undefined for a
 * name the allow-list drops.
 */
type ValueScrub = (key: string, value: AttributeValue) => AttributeValue | undefined;

function valueScrubber(scrubber: Scrubber, content: boolean): ValueScrub {
  const seen = new Map<string, string>();
  const text = (key: string, value: string, cap: boolean): string | undefined => {
    if (!cap && value.length > MAX_FACT_CHARS) return undefined;
    const cacheKey = `${key}\u0000${value}`;
    let safe = seen.get(cacheKey);
    if (safe === undefined) {
      safe = scrubber.scrub(value, { sink: "span", field: key });
      if (cap) safe = capText(safe, MAX_CONTENT_CHARS);
      seen.set(cacheKey, safe);
    }
    return safe;
  };
  return (key, value) => {
    const isContent = !FACT_ATTRIBUTES.has(key);
    if (isContent && !(content && CONTENT_ATTRIBUTES.has(key))) return undefined;
    if (typeof value === "string") return text(key, value, isContent);
    if (Array.isArray(value))
      return value
        .map((item: unknown) => (typeof item === "string" ? text(key, item, isContent) : item))
        .filter((item) => item !== undefined) as AttributeValue;
    return value;
  };
}

function filteredAttributes(list: unknown, scrub: ValueScrub): Attributes {
  const attributes: Attributes = {};
  if (!Array.isArray(list)) return attributes;
  for (const item of list) {
    if (!isObj(item) || typeof item["key"] !== "string") continue;
    const value = attributeValue(item["value"]);
    if (value === undefined) continue;
    const safe = scrub(item["key"], value);
    if (safe !== undefined) attributes[item["key"]] = safe;
  }
  return attributes;
}

/**
 * An OTLP AnyValue as an attribute value: a string, number or boolean, or an array of up to
 * MAX_ARRAY_ITEMS of them; nothing else. Arrays in arrays are dropped unread: walking nested values
 * would let a request of arrays nested a hundred thousand deep overflow the stack.
 */
function attributeValue(value: unknown): AttributeValue | undefined {
  const scalar = scalarValue(value);
  if (scalar !== undefined || !isObj(value)) return scalar;
  const array = isObj(value["arrayValue"]) ? value["arrayValue"]["values"] : undefined;
  if (!Array.isArray(array)) return undefined;
  const items: Array<string | number | boolean> = [];
  for (const item of array) {
    const kept = scalarValue(item);
    if (kept !== undefined) items.push(kept);
    if (items.length === MAX_ARRAY_ITEMS) break;
  }
  return items as AttributeValue;
}

function scalarValue(value: unknown): string | number | boolean | undefined {
  if (!isObj(value)) return undefined;
  if (typeof value["stringValue"] === "string") return value["stringValue"];
  if (typeof value["boolValue"] === "boolean") return value["boolValue"];
  const number = value["intValue"] ?? value["doubleValue"];
  if (typeof number !== "number" && typeof number !== "string") return undefined;
  const parsed = Number(number);
  return Number.isFinite(parsed) ? parsed : undefined;
}

function spanEvents(list: unknown, scrub: ValueScrub): TimedEvent[] {
  const events: TimedEvent[] = [];
  if (!Array.isArray(list)) return events;
  for (const raw of list) {
    if (events.length === MAX_EVENTS_PER_SPAN) break;
    if (!isObj(raw) || !plainName(raw["name"])) continue;
    const time = hrTimeOf(raw["timeUnixNano"]);
    if (time === undefined) continue;
    events.push({ name: raw["name"], time, attributes: filteredAttributes(raw["attributes"], scrub) });
  }
  return events;
}

/** The status code; its message is an error text, kept only as content. */
function statusOf(status: unknown, scrub: ValueScrub): ReadableSpan["status"] {
  const code = isObj(status) ? status["code"] : undefined;
  const mapped = code === 1 ? SpanStatusCode.OK : code === 2 ? SpanStatusCode.ERROR : SpanStatusCode.UNSET;
  const message = isObj(status) && typeof status["message"] === "string" ? status["message"] : "";
  const safe = message === "" ? undefined : scrub("error", message);
  return typeof safe === "string" ? { code: mapped, message: safe } : { code: mapped };
}

/** OTLP's kind (1 internal … 5 consumer; 0 unspecified) as the API's (0 internal … 4 consumer). */
function spanKindOf(kind: unknown): SpanKind {
  return typeof kind === "number" && kind >= 1 && kind <= 5 ? ((kind - 1) as SpanKind) : SpanKind.INTERNAL;
}

const NANOS = /^\d{1,20}$/;

/** Unix nanoseconds (a decimal string, or a number) as an HrTime; undefined when it is neither. */
function hrTimeOf(value: unknown): HrTime | undefined {
  if (typeof value === "string" && NANOS.test(value)) {
    const seconds = value.length > 9 ? Number(value.slice(0, -9)) : 0;
    return [seconds, Number(value.slice(-9))];
  }
  if (typeof value === "number" && Number.isFinite(value) && value >= 0)
    return [Math.floor(value / 1e9), Math.floor(value % 1e9)];
  return undefined;
}
