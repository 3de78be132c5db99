// A span no tracer started: ids given rather than minted (the CLI's own spans, the session's derived
// root), built finished and handed to the span processors (Telemetry.emit). The fields every such
// span has the same way are filled here.
import type { Attributes, HrTime, SpanKind, SpanStatus } from "@opentelemetry/api";
import { hrTimeDuration } from "@opentelemetry/core";
import type { Resource } from "@opentelemetry/resources";
import type { ReadableSpan, TimedEvent } from "@opentelemetry/sdk-trace-base";

export interface FinishedSpanFields {
  name: string;
  kind: SpanKind;
  traceId: string;
  spanId: string;
  /** The parent's span id in the same trace; undefined for a root. */
  parentSpanId: string | undefined;
  startTime: HrTime;
  endTime: HrTime;
  status: SpanStatus;
  attributes: Attributes;
  events?: TimedEvent[] | undefined;
  resource: Resource;
  instrumentationScope: ReadableSpan["instrumentationScope"];
}

const SAMPLED = 1;

export function finishedSpan(fields: FinishedSpanFields): ReadableSpan {
  const { traceId, spanId, parentSpanId } = fields;
  const spanContext = { traceId, spanId, traceFlags: SAMPLED };
  return {
    name: fields.name,
    kind: fields.kind,
    spanContext: () => spanContext,
    parentSpanContext:
      parentSpanId === undefined ? undefined : { traceId, spanId: parentSpanId, traceFlags: SAMPLED, isRemote: false },
    startTime: fields.startTime,
    endTime: fields.endTime,
    duration: hrTimeDuration(fields.startTime, fields.endTime),
    status: fields.status,
    attributes: fields.attributes,
    links: [],
    events: fields.events ?? [],
    ended: true,
    resource: fields.resource,
    instrumentationScope: fields.instrumentationScope,
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
  };
}
