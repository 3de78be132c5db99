// Spans as an observer of the event stream: the worker shows each attempt's events to the
// observer as it writes them, and writes the attempt span's ids (`trace`) into attempt.started.
import type { AttemptContext, AttemptObserver, EventObserver } from "../../events/index.ts";
import { AttemptSpans, type AttemptSpansOptions } from "./attempt.ts";

export function attemptSpansObserver(options: AttemptSpansOptions): EventObserver {
  return {
    attempt: (context: AttemptContext): AttemptObserver => new AttemptSpans(context, options),
  };
}
