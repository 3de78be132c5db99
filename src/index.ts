// The turnstream library: one import for producers, workers and tools built on the event log.
export * from "./cli/index.ts";
export * from "./log/index.ts";
export * from "./protocol/index.ts";
export * from "./telemetry/index.ts";
// cli/, log/ and telemetry/ each declare the same structural logger shape (they may not import one
// another); the telemetry one is the canonical name.
export type { Logger } from "./telemetry/index.ts";
