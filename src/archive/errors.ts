// Typed errors of the archive. Messages say what to change; they never carry event payloads.
import { TurnstreamError } from "../kernel/index.ts";

/** A put would overwrite an archived copy with one that does not extend it: two different histories. */
export class ArchiveConflictError extends TurnstreamError {
  readonly session: string;
  constructor(session: string, detail: string) {
    super(
      `the archive already holds a different copy of session ${session} (${detail}); ` +
        `a copy replaces the stored one only when it extends it: compare the two before removing either`,
      { code: "archive_conflict" },
    );
    this.session = session;
  }
}

/** What the store holds is not a valid copy (edited, truncated, or another session's): refused, never returned. */
export class ArchiveCorruptError extends TurnstreamError {
  /** The file or table the bad entry is in. */
  readonly where: string;
  /** Which entry: `line 3` of a file (the header is line 1), `seq 3` of a table; undefined for the whole copy. */
  readonly position: string | undefined;
  constructor(where: string, position: string | undefined, reason: string, cause?: unknown) {
    super(
      `${where}${position === undefined ? "" : ` ${position}`}: ${reason}; the archived copy was changed after it ` +
        `was written: restore it from a backup or archive the session again while Redis still holds it`,
      { code: "archive_corrupt", cause },
    );
    this.where = where;
    this.position = position;
  }
}

/** A copy handed to put is not consistent in itself (its digest, session or seqs disagree with its events). */
export class InvalidSessionCopyError extends TurnstreamError {
  readonly session: string;
  constructor(session: string, reason: string) {
    super(`the copy of session ${session} given to the archive is inconsistent: ${reason}; build it from the log`, {
      code: "invalid_session_copy",
    });
    this.session = session;
  }
}

/** An archive URL of a form no store understands. */
export class InvalidArchiveUrlError extends TurnstreamError {
  constructor(shown: string, reason: string) {
    super(
      `archive URL ${shown} is not usable: ${reason}; use postgres://user@host:port/db[?schema=name], ` +
        `postgresql://… or file:///absolute/dir`,
      { code: "invalid_archive_url" },
    );
  }
}

/** A listing of archived summaries asked for with options no store can answer. */
export class InvalidArchiveListingError extends TurnstreamError {
  constructor(reason: string) {
    super(
      `archived sessions cannot be listed so: ${reason}; pass a whole limit, an ISO time as before and a tenant's name as tenant`,
      {
        code: "invalid_archive_listing",
      },
    );
  }
}

/** A copy larger than the store can read back: refused before it is written, so retention keeps the session. */
export class ArchiveCopyTooLargeError extends TurnstreamError {
  readonly session: string;
  constructor(session: string, bytes: number, limit: number) {
    super(
      `the copy of session ${session} is ${bytes} bytes, more than this file archive reads back (${limit}); ` +
        `archive it to PostgreSQL, or raise FileArchive's maxDecompressedBytes`,
      { code: "archive_copy_too_large" },
    );
    this.session = session;
  }
}
