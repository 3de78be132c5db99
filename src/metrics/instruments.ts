// Instruments made exactly as names.ts defines them: name, unit, description and bucket boundaries.
import type { Counter, Histogram, Meter, ObservableCounter, ObservableGauge } from "@opentelemetry/api";
import type { MetricDef } from "./names.ts";

/** An instrument as names.ts defines it. */
export function counter(meter: Meter, def: MetricDef): Counter {
  return meter.createCounter(def.name, { unit: def.unit, description: def.description });
}

export function histogram(meter: Meter, def: MetricDef): Histogram {
  const advice = def.buckets === undefined ? undefined : { explicitBucketBoundaries: [...def.buckets] };
  return meter.createHistogram(def.name, {
    unit: def.unit,
    description: def.description,
    ...(advice === undefined ? {} : { advice }),
  });
}

export function gauge(meter: Meter, def: MetricDef): ObservableGauge {
  return meter.createObservableGauge(def.name, { unit: def.unit, description: def.description });
}

/** A counter read at collection from a running count (its kind in names.ts is `counter` too). */
export function observableCounter(meter: Meter, def: MetricDef): ObservableCounter {
  return meter.createObservableCounter(def.name, { unit: def.unit, description: def.description });
}
