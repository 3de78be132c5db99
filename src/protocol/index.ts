// The CLI's stream-json language. Imports nothing else of ours.
export * from "./schemas.ts";
export * from "./split.ts";
export * from "./parse.ts";
export { parsedLines, capText, toolResultText, objOf, type LinesInput } from "./lines.ts";
export * from "./classify.ts";
export * from "./fold.ts";
export * from "./render.ts";
export * from "./evidence.ts";
export * from "./summary.ts";
