// turnstream/testing: the scripted model server and hermetic CLI environments, for testing agents and
// skills offline against the real `claude` binary.
export {
  startModelServer,
  lastUserText,
  isSideRequest,
  type ModelServer,
  type ModelServerOptions,
  type RecordedRequest,
} from "./model-server.ts";
export {
  parseScript,
  InvalidScriptError,
  scriptSchema,
  type Script,
  type ScriptResponse,
  type ScriptBlock,
  type ScriptExpect,
} from "./script.ts";
export { normaliseRunText, toolResultDigest } from "./normalise.ts";
export {
  hermeticEnv,
  pinnedClaudeBin,
  DUMMY_API_KEY,
  type HermeticEnv,
  type HermeticEnvOptions,
} from "./hermetic-env.ts";
