// "turnstream/events": the event vocabulary: each kind's data schema, the sets of kinds readers
// branch on, and the observer interface spans and metrics see an attempt's events through.
export * from "../events/index.ts";
