// Text a span exports (tool arguments, error messages, stderr, hook names): scrubbed by the run's
// scrubber for the "span" sink, then capped. The RedactingSpanExporter scrubs everything again.
import type { AttemptContext } from "../../events/index.ts";
import { capText } from "../../protocol/index.ts";

/** Scrubs and caps one text; `field` says where it goes (the scrubber's hooks may use it). */
export type SpanText = (text: string, field: string) => string;

export const DEFAULT_MAX_CONTENT_CHARS = 1024;

export function spanText(scrub: AttemptContext["scrub"], maxChars: number): SpanText {
  return (text, field) => capText(scrub(text, field), maxChars);
}
