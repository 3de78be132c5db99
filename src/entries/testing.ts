// "turnstream/testing": the scripted model server and hermetic CLI environments, for testing agents
// and skills offline against the real `claude` binary.
export * from "../testing/index.ts";
