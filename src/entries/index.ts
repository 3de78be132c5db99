// The audiences' entries together: what the library's root ("turnstream", src/index.ts) offers a
// program that uses several of them. Each entry stays a subpath of its own.
export * from "./runner.ts";
export * from "./producer.ts";
export * from "./worker.ts";
export * from "./log.ts";
