// "turnstream/protocol": the CLI's stream-json language: line schemas, the incremental splitter,
// parsing, folding, tool call and result pairing, classification and renderings.
export * from "../protocol/index.ts";
