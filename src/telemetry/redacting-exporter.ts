// Wraps any span exporter so nothing unscrubbed reaches it: span and event names, status message,
// attributes of spans, events and links (strings and string arrays), and resource attributes. Stack
// traces are dropped outright (`exception.stacktrace`): a stack is raw text we never vouch for.
import type { Attributes, AttributeValue, Link } from "@opentelemetry/api";
import { ExportResultCode, type ExportResult } from "@opentelemetry/core";
import { resourceFromAttributes, type Resource } from "@opentelemetry/resources";
import type { ReadableSpan, SpanExporter, TimedEvent } from "@opentelemetry/sdk-trace-base";
import { isSecretFieldName, redactionMarker, type Scrubber } from "./scrub.ts";

const DROPPED = new Set(["exception.stacktrace"]);

export function scrubAttributes(attrs: Attributes | undefined, scrubber: Scrubber): Attributes {
  const out: Attributes = {};
  if (attrs === undefined) return out;
  for (const [rawKey, value] of Object.entries(attrs)) {
    if (DROPPED.has(rawKey) || value === undefined) continue;
    const key = scrubber.scrub(rawKey, { sink: "span" });
    out[key] = scrubValue(key, value, scrubber);
  }
  return out;
}

function scrubValue(key: string, value: AttributeValue, scrubber: Scrubber): AttributeValue {
  const ctx = { sink: "span", field: key };
  if (typeof value === "string") return value !== "" && isSecretFieldName(key) ? redactionMarker(key) : scrubber.scrub(value, ctx);
  if (Array.isArray(value)) {
    return (value as Array<string | number | boolean | null | undefined>).map((v) =>
      typeof v === "string" ? scrubber.scrub(v, ctx) : v,
    ) as AttributeValue;
  }
  return value;
}

export class RedactingSpanExporter implements SpanExporter {
  readonly #inner: SpanExporter;
  readonly #scrubber: Scrubber;
  // Spans of one provider share one resource: scrub it once. Keyed weakly so providers can go away.
  // Re-scrubbed when the scrubber has learnt new secrets since.
  readonly #resources = new WeakMap<Resource, { known: number; safe: Resource }>();
  #known = 0;

  constructor(inner: SpanExporter, scrubber: Scrubber) {
    this.#inner = inner;
    this.#scrubber = scrubber;
  }

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    let safe: ReadableSpan[];
    try {
      this.#known = this.#scrubber.size;
      safe = spans.map((s) => this.redact(s));
    } catch {
      // Never fall back to the raw spans: fail the batch.
      resultCallback({ code: ExportResultCode.FAILED, error: new Error("span redaction failed; the batch was dropped") });
      return;
    }
    this.#inner.export(safe, resultCallback);
  }

  shutdown(): Promise<void> {
    return this.#inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.#inner.forceFlush?.() ?? Promise.resolve();
  }

  redact(span: ReadableSpan): ReadableSpan {
    const s = this.#scrubber;
    const ctx = { sink: "span" };
    const events: TimedEvent[] = span.events.map((e) => ({
      time: e.time,
      name: s.scrub(e.name, ctx),
      attributes: scrubAttributes(e.attributes, s),
      droppedAttributesCount: e.droppedAttributesCount ?? 0,
    }));
    const links: Link[] = span.links.map((l) => ({
      context: l.context,
      attributes: scrubAttributes(l.attributes, s),
      droppedAttributesCount: l.droppedAttributesCount ?? 0,
    }));
    const status = span.status.message === undefined ? { ...span.status } : { ...span.status, message: s.scrub(span.status.message, ctx) };
    const spanContext = span.spanContext();
    return {
      name: s.scrub(span.name, ctx),
      kind: span.kind,
      spanContext: () => spanContext,
      ...(span.parentSpanContext === undefined ? {} : { parentSpanContext: span.parentSpanContext }),
      startTime: span.startTime,
      endTime: span.endTime,
      status,
      attributes: scrubAttributes(span.attributes, s),
      links,
      events,
      duration: span.duration,
      ended: span.ended,
      resource: this.#resource(span.resource),
      instrumentationScope: span.instrumentationScope,
      droppedAttributesCount: span.droppedAttributesCount,
      droppedEventsCount: span.droppedEventsCount,
      droppedLinksCount: span.droppedLinksCount,
    };
  }

  #resource(resource: Resource): Resource {
    const cached = this.#resources.get(resource);
    if (cached !== undefined && cached.known === this.#known) return cached.safe;
    const options = resource.schemaUrl === undefined ? undefined : { schemaUrl: resource.schemaUrl };
    const safe = resourceFromAttributes(scrubAttributes(resource.attributes, this.#scrubber), options);
    this.#resources.set(resource, { known: this.#known, safe });
    return safe;
  }
}
