// What every command prints is scrubbed: the secret-looking variables of this process's environment
// and the secret shapes the telemetry scrubber knows.
import { createScrubber } from "../../telemetry/index.ts";

export function defaultScrub(env: NodeJS.ProcessEnv = process.env): (text: string) => string {
  const scrubber = createScrubber({ env });
  return (text) => scrubber.scrub(text);
}
