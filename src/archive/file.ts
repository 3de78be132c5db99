// The archive as a folder of gzip JSONL files, one per session (`DIR/<session>.jsonl.gz`): for one
// machine, or for copies kept beside a fleet's database. Line 1 is a header (the session's state,
// summary and digest), then one envelope per line exactly as JSON.stringify wrote it. A copy is
// written to a temporary file, flushed to disk and renamed over the old one, so a reader or a crash
// sees the old copy or the new one, never part of one.
import { randomBytes } from "node:crypto";
import { constants as fsConstants, createReadStream, createWriteStream } from "node:fs";
import { link, lstat, mkdir, open, readdir, rename, stat, unlink } from "node:fs/promises";
import { join, resolve } from "node:path";
import { Readable, pipeline } from "node:stream";
import { pipeline as pipelineAsync } from "node:stream/promises";
import { createGunzip, createGzip } from "node:zlib";
import { z as zod } from "zod";
import { assertSessionId, IMPORTED_FIELD, isValidSessionId, type Envelope } from "../log/index.ts";
import type {
  Archive,
  ArchivedListing,
  ArchivedSummary,
  ArchiveReadOptions,
  ArchiveSummariesOptions,
  LogDigest,
  SessionCopy,
  SessionState,
} from "./archive.ts";
import {
  archivedSummarySchema,
  checkSummaryEnd,
  copyLines,
  logDigestSchema,
  sessionStateSchema,
  storedValue,
  StoredLines,
} from "./check.ts";
import { claimedSeq, DigestBuilder, extendsDigest, sameDigest } from "./digest.ts";
import { ArchiveConflictError, ArchiveCorruptError } from "./errors.ts";
import { byRecentActivity, lastActiveMs, listingBounds } from "./listing.ts";

export const FILE_SUFFIX = ".jsonl.gz";
/** Temporary files start with a dot: no session id does, so a half-written copy never lists as a session. */
const TEMP_PREFIX = ".tmp-";
/** Headers read at once by a listing: each is a small read, but a folder may hold thousands. */
const HEADER_CONCURRENCY = 8;
/** Temporary files older than this are what a crashed put left; migrate removes them. */
const STALE_TEMP_MS = 60 * 60 * 1000;

const headerSchema = zod.object({
  turnstreamArchive: zod.literal(1),
  session: zod.string(),
  state: sessionStateSchema,
  summary: archivedSummarySchema,
  digest: logDigestSchema,
});

type FileHeader = zod.infer<typeof headerSchema>;

export interface FileArchiveOptions {
  /**
   * Runs after a copy is written and flushed to its temporary file, before the rename makes it the
   * stored copy. For fault injection: a throw here is a put that failed at that step.
   */
  beforeRename?: ((tempPath: string) => Promise<void> | void) | undefined;
}

export class FileArchive implements Archive {
  readonly location: string;
  readonly dir: string;
  readonly #beforeRename: FileArchiveOptions["beforeRename"];

  constructor(dir: string, options: FileArchiveOptions = {}) {
    this.dir = resolve(dir);
    this.location = `file://${this.dir}`;
    this.#beforeRename = options.beforeRename;
  }

  async migrate(): Promise<{ applied: string[] }> {
    const created = await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await this.#removeStaleTemps();
    return { applied: created === undefined ? [] : [`create directory ${this.dir}`] };
  }

  /**
   * A first copy cannot be stored twice (see #createFrom); replacing puts of one session are not
   * serialised between processes: this store is for one machine with one archiver.
   */
  async put(copy: SessionCopy): Promise<void> {
    const lines = copyLines(copy);
    const session = copy.session;
    const stored = await this.digest(session);
    if (stored !== undefined) {
      if (sameDigest(stored, copy.digest)) return;
      if (!extendsDigest(copy.events, stored)) throw conflict(session, stored, copy.digest);
    }
    const header: FileHeader = {
      turnstreamArchive: 1,
      session,
      state: copy.state,
      summary: copy.summary,
      digest: copy.digest,
    };
    const temp = await this.#writeTemp(session, [JSON.stringify(header), ...lines]);
    try {
      await this.#beforeRename?.(temp);
      if (stored === undefined) await this.#createFrom(temp, copy);
      else await rename(temp, this.#path(session));
      await syncDirectory(this.dir);
    } finally {
      await unlink(temp).catch(() => undefined);
    }
  }

  async digest(session: string): Promise<LogDigest | undefined> {
    const path = this.#path(session);
    if (!(await exists(path))) return undefined;
    const builder = new DigestBuilder();
    let first = true;
    for await (const text of gzipLines(path)) {
      if (first) first = false;
      else builder.add(text, claimedSeq(text));
    }
    if (first) throw new ArchiveCorruptError(path, undefined, "the file is empty");
    return builder.digest();
  }

  async *read(session: string, options: ArchiveReadOptions = {}): AsyncGenerator<Envelope> {
    const path = this.#path(session);
    if (!(await exists(path))) return;
    const lines = gzipLines(path);
    const header = await readHeader(path, session, lines);
    if (header === undefined) return;
    const checker = new StoredLines(path, session);
    const builder = new DigestBuilder();
    let lineNumber = 1;
    for await (const text of lines) {
      lineNumber++;
      const envelope = checker.check(text, `line ${lineNumber}`);
      builder.add(text, envelope.seq);
      if (options.toSeq !== undefined && envelope.seq > options.toSeq) return;
      if (options.fromSeq === undefined || envelope.seq >= options.fromSeq) yield envelope;
    }
    // Only a read to the end can check the whole text against the header (an edit that keeps every line valid).
    const found = builder.digest();
    if (!sameDigest(found, header.digest))
      throw new ArchiveCorruptError(
        path,
        undefined,
        `its events digest to ${show(found)}, its header says ${show(header.digest)}`,
      );
  }

  async state(session: string): Promise<SessionState | undefined> {
    return (await this.#header(session))?.state;
  }

  async summary(session: string): Promise<ArchivedSummary | undefined> {
    return (await this.#header(session))?.summary;
  }

  /**
   * Reads only each file's header line (the gzip stream is stopped after it), then sorts in memory:
   * a folder has no index by time, and this store is for one machine's sessions.
   */
  async summaries(options: ArchiveSummariesOptions = {}): Promise<ArchivedListing[]> {
    const { limit, beforeMs } = listingBounds(options);
    const sessions: string[] = [];
    for await (const session of this.sessions()) sessions.push(session);
    const listed: ArchivedListing[] = [];
    for (let start = 0; start < sessions.length; start += HEADER_CONCURRENCY) {
      const batch = sessions.slice(start, start + HEADER_CONCURRENCY);
      for (const header of await Promise.all(batch.map((session) => this.#listedHeader(session, options))))
        if (header !== undefined)
          listed.push({ summary: header.summary, importedAt: header.state.meta[IMPORTED_FIELD] ?? null });
    }
    const wanted = listed
      .filter(({ summary }) => beforeMs === undefined || (lastActiveMs(summary) ?? Infinity) < beforeMs)
      .sort((left, right) => byRecentActivity(left.summary, right.summary));
    return limit === undefined ? wanted : wanted.slice(0, limit);
  }

  /** A session's header for a listing; undefined when its file went meanwhile or (told to onCorrupt) is corrupt. */
  async #listedHeader(session: string, options: ArchiveSummariesOptions): Promise<FileHeader | undefined> {
    try {
      return await this.#header(session);
    } catch (err) {
      if (!(err instanceof ArchiveCorruptError) || options.onCorrupt === undefined) throw err;
      options.onCorrupt(err);
      return undefined;
    }
  }

  async *sessions(): AsyncGenerator<string> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (err) {
      if (isMissing(err)) return;
      throw err;
    }
    for (const name of names.sort()) {
      if (!name.endsWith(FILE_SUFFIX)) continue;
      const session = name.slice(0, -FILE_SUFFIX.length);
      if (isValidSessionId(session)) yield session;
    }
  }

  /** Files hold no live rows: the summary of a live session is the projector's in Redis. */
  async upsertSummary(_summary: ArchivedSummary): Promise<void> {}

  async close(): Promise<void> {}

  #path(session: string): string {
    assertSessionId(session);
    return join(this.dir, `${session}${FILE_SUFFIX}`);
  }

  async #header(session: string): Promise<FileHeader | undefined> {
    const path = this.#path(session);
    if (!(await exists(path))) return undefined;
    const lines = gzipLines(path);
    try {
      return await readHeader(path, session, lines);
    } finally {
      await lines.return(undefined);
    }
  }

  /** The copy in a new temporary file in the folder (same file system, so the rename is atomic), flushed to disk. */
  async #writeTemp(session: string, lines: string[]): Promise<string> {
    const temp = join(this.dir, `${TEMP_PREFIX}${session}-${randomBytes(6).toString("hex")}`);
    const text = Readable.from(
      (function* () {
        for (const line of lines) yield `${line}\n`;
      })(),
    );
    try {
      await pipelineAsync(text, createGzip(), createWriteStream(temp, { flags: "wx", mode: 0o600, flush: true }));
    } catch (err) {
      await unlink(temp).catch(() => undefined);
      throw err;
    }
    return temp;
  }

  /**
   * A first copy is linked into place, which fails when the name exists: two puts racing on a new
   * session cannot both win. The loser is a no-op when the winner stored the same copy.
   */
  async #createFrom(temp: string, copy: SessionCopy): Promise<void> {
    try {
      await link(temp, this.#path(copy.session));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const stored = await this.digest(copy.session);
      if (stored === undefined || !sameDigest(stored, copy.digest))
        throw conflict(copy.session, stored ?? { count: 0, lastSeq: 0, sha256: "" }, copy.digest);
    }
  }

  async #removeStaleTemps(): Promise<void> {
    const now = Date.now();
    for (const name of await readdir(this.dir)) {
      if (!name.startsWith(TEMP_PREFIX)) continue;
      const path = join(this.dir, name);
      const info = await stat(path).catch(() => undefined);
      if (info !== undefined && now - info.mtimeMs > STALE_TEMP_MS) await unlink(path).catch(() => undefined);
    }
  }
}

function conflict(session: string, stored: LogDigest, given: LogDigest): ArchiveConflictError {
  return new ArchiveConflictError(session, `stored: ${show(stored)}; given: ${show(given)}`);
}

function show(digest: LogDigest): string {
  return `${digest.count} events to seq ${digest.lastSeq}, sha256 ${digest.sha256.slice(0, 12)}…`;
}

/** The header line, checked: the archive's format, this session's. Undefined for a file with no lines. */
async function readHeader(
  path: string,
  session: string,
  lines: AsyncGenerator<string>,
): Promise<FileHeader | undefined> {
  const first = await lines.next();
  if (first.done === true) throw new ArchiveCorruptError(path, undefined, "the file is empty");
  let value: unknown;
  try {
    value = JSON.parse(first.value);
  } catch (err) {
    throw new ArchiveCorruptError(path, "line 1", "the header is not JSON", err);
  }
  const header = storedValue(headerSchema, value, path, "line 1");
  if (header.session !== session)
    throw new ArchiveCorruptError(path, "line 1", `the header is of session ${header.session}, not ${session}`);
  if (header.summary.session !== session)
    throw new ArchiveCorruptError(path, "line 1", `the header's summary is of session ${header.summary.session}`);
  checkSummaryEnd(header.summary.lastSeq, header.digest.lastSeq, path, "line 1");
  return header;
}

/** A gzip file's lines, split on "\n" only; a file that is not gzip or is cut short is ArchiveCorruptError. */
async function* gzipLines(path: string): AsyncGenerator<string> {
  // Not followed even if the name became a link after `exists` looked; never blocks on a FIFO.
  const flags = fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK;
  const handle = await open(path, flags).catch((err: unknown) => {
    throw new ArchiveCorruptError(path, undefined, `unreadable (${(err as Error).message})`, err);
  });
  const stream = pipeline(createReadStream(path, { fd: handle }), createGunzip(), () => undefined);
  let parts: Buffer[] = [];
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      let start = 0;
      for (;;) {
        const newline = chunk.indexOf(0x0a, start);
        if (newline === -1) break;
        parts.push(chunk.subarray(start, newline));
        yield Buffer.concat(parts).toString("utf8");
        parts = [];
        start = newline + 1;
      }
      if (start < chunk.length) parts.push(chunk.subarray(start));
    }
  } catch (err) {
    if (err instanceof ArchiveCorruptError) throw err;
    throw new ArchiveCorruptError(path, undefined, `unreadable as gzip (${(err as Error).message})`, err);
  } finally {
    stream.destroy();
  }
  if (parts.length > 0) yield Buffer.concat(parts).toString("utf8");
}

/**
 * Whether a session's file is there. Only a regular file counts: a symlink would let whoever reaches
 * the folder point a session at a file anywhere (or a put write through it), and a FIFO or device
 * would block a reader forever; either is refused, never followed.
 */
async function exists(path: string): Promise<boolean> {
  let info;
  try {
    info = await lstat(path);
  } catch (err) {
    if (isMissing(err)) return false;
    throw err;
  }
  if (!info.isFile())
    throw new ArchiveCorruptError(path, undefined, "is not a regular file (a link or a special file)");
  return true;
}

function isMissing(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === "ENOENT";
}

/** Flushes the folder's entry list, so a rename survives a power cut. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
