// The model gateway's fleet-wide cooldowns as lines of text, for `status` and `tenants`.
import type { CooldownEntry } from "../../gateway/index.ts";
import { formatAge } from "./_duration.ts";

/** One line for the count, then one per credential (its fingerprint, never the secret). */
export function cooldownLines(cooldowns: readonly CooldownEntry[]): string[] {
  if (cooldowns.length === 0) return ["model cooldowns: none"];
  return [
    `model cooldowns: ${cooldowns.length} (the gateways hold these credentials' requests)`,
    ...cooldowns.map((cooldown) => {
      const left =
        cooldown.remainingMs > 0
          ? `${formatAge(cooldown.remainingMs)} left`
          : cooldown.probing
            ? "ended, one probe out"
            : "ended, the next request probes";
      return `  credential ${cooldown.fingerprint}: ${cooldown.status}, until ${cooldown.until} (${left}), strike ${cooldown.strikes}, ${cooldown.probes} probe(s) so far`;
    }),
  ];
}
