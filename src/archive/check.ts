// The checks both stores share: a copy before it is stored, and every stored line as it is read back
// (a file or a row is untrusted input: whoever reaches the store can edit it).
import { z as zod } from "zod";
import { labelNameSchema, labelValueSchema } from "../events/index.ts";
import { assertSessionId, checkEnvelope, SESSION_ID_PATTERN, type Envelope } from "../log/index.ts";
import { tenantNameSchema } from "../tenants/index.ts";
import type { SessionCopy } from "./archive.ts";
import { envelopeLine, logDigest, sameDigest } from "./digest.ts";
import { ArchiveCorruptError, InvalidSessionCopyError } from "./errors.ts";

/**
 * The archived text of each event of a copy, after checking the copy agrees with itself: every event
 * a valid envelope of the session, seqs 1, 2, 3… and the digest, state and summary its own.
 */
export function copyLines(copy: SessionCopy): string[] {
  assertSessionId(copy.session);
  const session = copy.session;
  const lines: string[] = [];
  for (const [index, envelope] of copy.events.entries()) {
    const line = envelopeLine(envelope);
    const checked = checkEnvelope(JSON.parse(line));
    if (!checked.success) throw new InvalidSessionCopyError(session, `event ${index + 1}: ${checked.issues[0]}`);
    if (envelope.session !== session)
      throw new InvalidSessionCopyError(session, `event ${index + 1} belongs to session ${envelope.session}`);
    if (envelope.seq !== index + 1)
      throw new InvalidSessionCopyError(session, `event ${index + 1} has seq ${envelope.seq}; a copy holds every seq`);
    // Stored as the log gives it (schema key order, no extra keys), so a read gives back the same text.
    if (envelopeLine(checked.data) !== line)
      throw new InvalidSessionCopyError(session, `event ${index + 1} is not in the log's own form (keys or order)`);
    lines.push(line);
  }
  if (!sameDigest(logDigest(copy.events), copy.digest))
    throw new InvalidSessionCopyError(session, "its digest is not the digest of its events");
  if (copy.summary.session !== session)
    throw new InvalidSessionCopyError(session, `its summary is of session ${copy.summary.session}`);
  if (copy.summary.lastSeq !== copy.digest.lastSeq)
    throw new InvalidSessionCopyError(
      session,
      `its summary ends at seq ${copy.summary.lastSeq}, its events at ${copy.digest.lastSeq}`,
    );
  if (!archivedSummarySchema.safeParse(copy.summary).success)
    throw new InvalidSessionCopyError(session, "its summary does not fit the summary row's shape");
  if (!sessionStateSchema.safeParse(copy.state).success)
    throw new InvalidSessionCopyError(session, "its state is not three maps of strings (meta, conf, registered)");
  return lines;
}

/** Checks lines read back from a store, in order: each the exact text of an envelope of the session at the next seq. */
export class StoredLines {
  readonly #where: string;
  readonly #session: string;
  #nextSeq: number;

  constructor(where: string, session: string, firstSeq = 1) {
    this.#where = where;
    this.#session = session;
    this.#nextSeq = firstSeq;
  }

  /** The envelope `text` holds; `position` says where it was for the error (`line 4`, `seq 3`). */
  check(text: string, position: string): Envelope {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw new ArchiveCorruptError(this.#where, position, "not JSON", err);
    }
    const checked = checkEnvelope(value);
    if (!checked.success)
      throw new ArchiveCorruptError(
        this.#where,
        position,
        `not an envelope (${checked.issues.slice(0, 2).join("; ")})`,
      );
    const envelope = checked.data;
    if (envelope.session !== this.#session)
      throw new ArchiveCorruptError(this.#where, position, `holds an event of another session, not ${this.#session}`);
    if (envelope.seq !== this.#nextSeq)
      throw new ArchiveCorruptError(this.#where, position, `holds seq ${envelope.seq} where ${this.#nextSeq} belongs`);
    if (envelopeLine(envelope) !== text)
      throw new ArchiveCorruptError(this.#where, position, "is not the text the archive wrote (keys added or moved)");
    this.#nextSeq++;
    return envelope;
  }
}

// ---- what a store holds beside the events: read back through these schemas ----------------------

const count = zod.number().int().nonnegative();
const stringRecord = zod.record(zod.string(), zod.string());

export const logDigestSchema = zod.object({ count, lastSeq: count, sha256: zod.string().regex(/^[0-9a-f]{64}$/) });

export const sessionStateSchema = zod.object({ meta: stringRecord, conf: stringRecord, registered: stringRecord });

export const archivedSummarySchema = zod.object({
  session: zod.string().regex(SESSION_ID_PATTERN),
  status: zod.string(),
  turns: count,
  attempts: count,
  costUsd: zod.number().nonnegative(),
  tokens: zod.object({ input: count, output: count, cacheRead: count, cacheCreation: count }),
  model: zod.string().nullable(),
  cwd: zod.string().nullable(),
  // Labels are printed by listings and grouped by in SQL: read back under the rules a turn's labels
  // were enqueued with (no control or bidi characters), so an edited row cannot put escapes on a
  // terminal. No count cap: the session's summary merges every turn's labels.
  labels: zod.record(labelNameSchema, labelValueSchema),
  // Read back as a tenant name or not at all, for the same reason. Copies stored before the summary
  // kept it read back as null.
  tenant: tenantNameSchema.nullable().default(null),
  firstAt: zod.string().nullable(),
  lastAt: zod.string().nullable(),
  lastSeq: count,
  errorKinds: zod.record(zod.string(), count),
  decisions: zod.object({ allowed: count, denied: count, pending: count }),
  // Copies stored before the summary kept it read back as null (not known), not as corrupt.
  lastErrorKind: zod.string().nullable().default(null),
});

/** `value` read through `schema`, or ArchiveCorruptError naming where it was and what did not fit. */
export function storedValue<T>(schema: zod.ZodType<T>, value: unknown, where: string, position: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new ArchiveCorruptError(
    where,
    position,
    `${issue?.path.join(".") || "(root)"}: ${issue?.message ?? "invalid"}`,
  );
}

/**
 * Refuses a stored summary that does not end where the stored events do. A reader takes a session's
 * length from its summary (SessionHistory.stat), and a forger who appends an event and recomputes
 * the digest but leaves the summary is caught here, before anything of the copy is used.
 */
export function checkSummaryEnd(summaryLastSeq: number, digestLastSeq: number, where: string, position: string): void {
  if (summaryLastSeq !== digestLastSeq)
    throw new ArchiveCorruptError(
      where,
      position,
      `its summary says last seq ${summaryLastSeq}, its digest last seq ${digestLastSeq}`,
    );
}
