// The shared kernel: the few definitions every module needs and none owns. It imports nothing of ours,
// so any module may import it.
export { type Logger, silentLogger } from "./logger.ts";
export { TurnstreamError, type TurnstreamErrorOptions } from "./errors.ts";
export { isObj, numberField, objField, stringField, type Obj } from "./fields.ts";
export { BodyTooLargeError, checkPortFree, listen, PortInUseError, readBody, readBodyBytes, sendJson } from "./http.ts";
export { backoffDelayMs, type BackoffOptions } from "./backoff.ts";
export { waitUnlessAborted, withTimeout } from "./deadline.ts";
export { parseDuration } from "./duration.ts";
export { instanceStem } from "./instance-stem.ts";
export { packageVersion } from "./package-version.ts";
export { stableJson } from "./stable-json.ts";
export { errorFields, errorReporter, RepeatLimiter, type ErrorReporter } from "./repeated-errors.ts";

/** The key prefix of the event log and its read models, when none is configured. */
export const DEFAULT_PREFIX = "ts:";
export { forTerminal, unsafeCharacter, type DisplayOptions } from "./display.ts";
