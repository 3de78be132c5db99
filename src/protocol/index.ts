// The CLI's stream-json language. Imports nothing else of ours.
export * from "./schemas.ts";
export * from "./split.ts";
export * from "./parse.ts";
