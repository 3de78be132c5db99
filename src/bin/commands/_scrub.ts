// What every command prints is scrubbed: the secret-looking variables of this process's environment
// and the secret shapes the telemetry scrubber knows.
import { createScrubber, type Scrubber } from "../../telemetry/index.ts";

/** The scrubber behind defaultScrub, for output that is structured (scrubDeep) rather than text. */
export function defaultScrubber(env: NodeJS.ProcessEnv = process.env): Scrubber {
  return createScrubber({ env });
}

export function defaultScrub(env: NodeJS.ProcessEnv = process.env): (text: string) => string {
  const scrubber = defaultScrubber(env);
  return (text) => scrubber.scrub(text);
}
