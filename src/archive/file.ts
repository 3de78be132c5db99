// The archive as a folder of gzip JSONL files, one per session (`DIR/<session>.jsonl.gz`): for one
// machine, or for copies kept beside a fleet's database. Line 1 is a header (the session's state,
// summary and digest), then one envelope per line exactly as JSON.stringify wrote it. A copy is
// written to a temporary file, flushed to disk and renamed over the old one, so a reader or a crash
// sees the old copy or the new one, never part of one.
import { constants, isAscii, isUtf8 } from "node:buffer";
import { randomBytes } from "node:crypto";
import {
  closeSync,
  constants as fsConstants,
  createWriteStream,
  fstatSync,
  openSync,
  readFileSync,
  readSync,
} from "node:fs";
import { link, mkdir, open, readdir, rename, stat, unlink } from "node:fs/promises";
import { join, resolve } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { constants as zlibConstants, createGzip, gunzipSync } from "node:zlib";
import { z as zod } from "zod";
import { assertSessionId, IMPORTED_FIELD, isValidSessionId, type Envelope } from "../log/index.ts";
import type {
  Archive,
  ArchivedListing,
  ArchivedRecord,
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
import { claimedSeq, describeDigest, joinedLinesDigest, putConflict, putWrites, sameDigest } from "./digest.ts";
import { ArchiveCopyTooLargeError, ArchiveCorruptError } from "./errors.ts";
import { byRecentActivity, lastActiveMs, listingBounds } from "./listing.ts";

export const FILE_SUFFIX = ".jsonl.gz";
/** Temporary files start with a dot: no session id does, so a half-written copy never lists as a session. */
const TEMP_PREFIX = ".tmp-";
/** Headers read at once by a listing: each is a small read, but a folder may hold thousands. */
const HEADER_CONCURRENCY = 8;
/** Temporary files older than this are what a crashed put left; migrate removes them. */
const STALE_TEMP_MS = 60 * 60 * 1000;
/**
 * Compressed bytes decompressed at first when only the header is wanted: a header is a few hundred
 * bytes, the events after it can be megabytes. A longer header is read in larger prefixes.
 */
const HEADER_PREFIX_BYTES = 4096;
/**
 * The most a copy's file may decompress to by default: past it the file is refused as a gzip bomb
 * (a few KB of gzip can expand to gigabytes). The log bounds no session's size (any number of
 * events, blobs inlined), but a reader holds a copy's events as one string, which V8 caps at
 * buffer.constants.MAX_STRING_LENGTH (about 512 Mi characters), and JSON is almost all one-byte
 * characters: 1 GiB leaves room for any copy a reader can hold.
 */
const DEFAULT_MAX_DECOMPRESSED_BYTES = 1024 ** 3;

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
  /** The most bytes a copy's file may decompress to (default 1 GiB); a file past it is refused as corrupt. */
  maxDecompressedBytes?: number | undefined;
}

export class FileArchive implements Archive {
  readonly location: string;
  readonly dir: string;
  readonly #beforeRename: FileArchiveOptions["beforeRename"];
  readonly #maxDecompressedBytes: number;

  constructor(dir: string, options: FileArchiveOptions = {}) {
    this.dir = resolve(dir);
    this.location = `file://${this.dir}`;
    this.#beforeRename = options.beforeRename;
    this.#maxDecompressedBytes = options.maxDecompressedBytes ?? DEFAULT_MAX_DECOMPRESSED_BYTES;
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
    if (!putWrites(stored, copy)) return;
    const header: FileHeader = {
      turnstreamArchive: 1,
      session,
      state: copy.state,
      summary: copy.summary,
      digest: copy.digest,
    };
    const fileLines = [JSON.stringify(header), ...lines];
    this.#refuseUnreadable(session, fileLines);
    const temp = await this.#writeTemp(session, fileLines);
    try {
      await this.#beforeRename?.(temp);
      if (stored === undefined) await this.#createFrom(temp, copy);
      else await rename(temp, this.#path(session));
      await syncDirectory(this.dir);
    } finally {
      await unlink(temp).catch(() => undefined);
    }
  }

  /** A copy is written only if a read can take it back whole (a file, then a string, each capped). */
  #refuseUnreadable(session: string, lines: readonly string[]): void {
    const limit = Math.min(this.#maxDecompressedBytes, constants.MAX_STRING_LENGTH);
    let bytes = 0;
    for (const line of lines) bytes += Buffer.byteLength(line) + 1;
    if (bytes > limit) throw new ArchiveCopyTooLargeError(session, bytes, limit);
  }

  async digest(session: string): Promise<LogDigest | undefined> {
    const path = this.#path(session);
    const file = readStoredFile(path, this.#maxDecompressedBytes);
    if (file === undefined) return undefined;
    return joinedLinesDigest(file.joined, file.lines.length, claimedSeq(file.lines.at(-1) ?? ""));
  }

  /**
   * Nothing is handed out before the whole file is checked: every line an envelope of this session
   * at the next seq, and all of them against the header's digest (an edit that keeps every line valid).
   */
  async *read(session: string, options: ArchiveReadOptions = {}): AsyncGenerator<Envelope> {
    const path = this.#path(session);
    const file = readStoredFile(path, this.#maxDecompressedBytes);
    if (file === undefined) return;
    const header = checkedHeader(path, session, file.header);
    const checker = new StoredLines(path, session);
    const envelopes = file.lines.map((text, index) => checker.check(text, `line ${index + 2}`));
    const found = joinedLinesDigest(file.joined, envelopes.length, envelopes.at(-1)?.seq ?? 0);
    if (!sameDigest(found, header.digest))
      throw new ArchiveCorruptError(
        path,
        undefined,
        `its events digest to ${describeDigest(found)}, its header says ${describeDigest(header.digest)}`,
      );
    const from = options.fromSeq ?? 1;
    const to = options.toSeq ?? Number.POSITIVE_INFINITY;
    for (const envelope of envelopes) if (envelope.seq >= from && envelope.seq <= to) yield envelope;
  }

  async state(session: string): Promise<SessionState | undefined> {
    return (await this.#header(session))?.state;
  }

  async summary(session: string): Promise<ArchivedSummary | undefined> {
    return (await this.#header(session))?.summary;
  }

  async record(session: string): Promise<ArchivedRecord | undefined> {
    const header = await this.#header(session);
    return header === undefined ? undefined : { state: header.state, summary: header.summary };
  }

  /**
   * Reads only each file's header line (from as little of the file's start as holds it), then sorts in memory:
   * a folder has no index by time, and this store is for one machine's sessions.
   */
  async summaries(options: ArchiveSummariesOptions = {}): Promise<ArchivedListing[]> {
    const { limit, beforeMs, tenant } = listingBounds(options);
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
      .filter(({ summary }) => tenant === undefined || summary.tenant === tenant)
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
    const text = readFirstLine(path, this.#maxDecompressedBytes);
    return text === undefined ? undefined : checkedHeader(path, session, text);
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
      await pipeline(text, createGzip(), createWriteStream(temp, { flags: "wx", mode: 0o600, flush: true }));
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
        throw putConflict(copy.session, stored, copy.digest);
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

/** The header line's text, checked: the archive's format, this session's. */
function checkedHeader(path: string, session: string, text: string): FileHeader {
  let value: unknown;
  try {
    value = JSON.parse(text);
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

/**
 * A stored file as text: its header line, its event lines (split on "\n" only; the last "\n" ends
 * the last line) and those lines as the one UTF-8 text they were joined into, for the digest.
 */
interface StoredFile {
  header: string;
  lines: string[];
  joined: Buffer;
}

/**
 * The whole file, read and decompressed in one call each (the copy is held in memory anyway, and one
 * call costs a fraction of a stream's chunks); undefined when there is no file. The reads of a file
 * are synchronous: a local file reads in microseconds from the page cache, less than the synchronous
 * decompression and parsing that follow, while each step of an asynchronous read waits on the thread
 * pool and the event loop (a tenth of an archived replay).
 */
function readStoredFile(path: string, maxBytes: number): StoredFile | undefined {
  const fd = openStoredFile(path);
  if (fd === undefined) return undefined;
  let compressed: Buffer;
  try {
    compressed = readFileSync(fd);
  } finally {
    closeSync(fd);
  }
  const text = decompressed(path, compressed, true, maxBytes);
  const headerEnd = text.indexOf(0x0a);
  if (headerEnd === -1) return { header: utf8(path, text), lines: [], joined: Buffer.alloc(0) };
  const events = text.subarray(headerEnd + 1);
  const joined = events.at(-1) === 0x0a ? events.subarray(0, -1) : events;
  return {
    header: utf8(path, text.subarray(0, headerEnd)),
    lines: events.length === 0 ? [] : utf8(path, joined).split("\n"),
    joined,
  };
}

/** The file's first line, from as little of its start as holds it; undefined when there is no file. */
function readFirstLine(path: string, maxBytes: number): string | undefined {
  const fd = openStoredFile(path);
  if (fd === undefined) return undefined;
  try {
    for (let size = HEADER_PREFIX_BYTES; ; size *= 4) {
      const buffer = Buffer.alloc(size);
      const bytesRead = readSync(fd, buffer, 0, size, 0);
      const whole = bytesRead < size;
      const text = decompressed(path, buffer.subarray(0, bytesRead), whole, maxBytes);
      const lineEnd = text.indexOf(0x0a);
      if (lineEnd !== -1) return utf8(path, text.subarray(0, lineEnd));
      if (whole) return utf8(path, text);
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * Gunzipped bytes; ArchiveCorruptError for bytes that are not gzip, that expand past `maxBytes`, or,
 * when they are the whole file, cut short (a prefix of the file is decompressed as far as it goes).
 */
function decompressed(path: string, compressed: Buffer, whole: boolean, maxBytes: number): Buffer {
  try {
    const text = gunzipSync(compressed, {
      maxOutputLength: maxBytes,
      ...(whole ? {} : { finishFlush: zlibConstants.Z_SYNC_FLUSH }),
    });
    if (whole && text.length === 0) throw new ArchiveCorruptError(path, undefined, "the file is empty");
    return text;
  } catch (err) {
    if (err instanceof ArchiveCorruptError) throw err;
    if ((err as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE")
      throw new ArchiveCorruptError(
        path,
        undefined,
        `it decompresses to more than ${maxBytes} bytes, more than a copy may hold (a gzip bomb); ` +
          `a genuine copy that large needs FileArchive's maxDecompressedBytes raised`,
        err,
      );
    throw new ArchiveCorruptError(path, undefined, `unreadable as gzip (${(err as Error).message})`, err);
  }
}

/** Bytes as text; the archive writes UTF-8, so anything else is an edit (and would not hash as its text). */
function utf8(path: string, bytes: Buffer): string {
  // ASCII, which JSON mostly is, reads the same as latin1, and latin1 decodes in a third of the time.
  if (isAscii(bytes)) return bytes.toString("latin1");
  if (!isUtf8(bytes)) throw new ArchiveCorruptError(path, undefined, "its text is not UTF-8");
  return bytes.toString("utf8");
}

/**
 * A session's file opened for reading, or undefined when there is none. Only a regular file counts:
 * a symlink would let whoever reaches the folder point a session at a file anywhere (or a put write
 * through it), and a FIFO or device would block a reader forever; either is refused, never followed.
 * The name is opened once and only that descriptor is read, so a name swapped for a link after a
 * look cannot be followed: O_NOFOLLOW fails on a link, O_NONBLOCK returns at once on a FIFO, and
 * fstat then tells what was opened.
 */
function openStoredFile(path: string): number | undefined {
  let fd: number;
  try {
    fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  } catch (err) {
    if (isMissing(err)) return undefined;
    if ((err as NodeJS.ErrnoException).code === "ELOOP") throw notRegularFile(path);
    throw new ArchiveCorruptError(path, undefined, `unreadable (${(err as Error).message})`, err);
  }
  let regular = false;
  try {
    regular = fstatSync(fd).isFile();
  } finally {
    if (!regular) closeSync(fd);
  }
  if (!regular) throw notRegularFile(path);
  return fd;
}

function notRegularFile(path: string): ArchiveCorruptError {
  return new ArchiveCorruptError(path, undefined, "is not a regular file (a link or a special file)");
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
