// The turnstream library ("turnstream"): a convenience that re-exports the entries by audience
// (src/entries/), for programs that use several of them. test/package/exports.json lists every
// entry's names. The CLI's stream-json language ("turnstream/protocol"), the event vocabulary
// ("turnstream/events") and the scripted model server ("turnstream/testing") stay subpaths of their own.
export * from "./entries/index.ts";
