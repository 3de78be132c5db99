// Incremental newline splitter for CLI stdout. Works on bytes, so a UTF-8 sequence split across
// chunks is decoded whole (0x0A never occurs inside a multi-byte sequence) and the output is the
// same for any chunking. A line longer than maxLineBytes is not kept: it becomes a `truncated` item
// carrying its byte length and sha256, hashed as it arrives so memory stays bounded.
import { createHash, type Hash } from "node:crypto";

export type SplitItem = { text: string } | { truncated: true; byteLength: number; sha256: string };

export interface LineSplitterOptions {
  /** Lines above this many bytes (without the line ending) become truncated items. Default 64 MiB. */
  maxLineBytes?: number | undefined;
}

export interface LineSplitter {
  push(chunk: Uint8Array): SplitItem[];
  /** Flushes a last line that had no trailing newline. */
  end(): SplitItem[];
}

export const DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024;

const LF = 0x0a;
const CR = 0x0d;

function asBuffer(chunk: Uint8Array): Buffer {
  return Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

function isBlank(text: string): boolean {
  // Cheap exit for the common case (a JSON line starts with "{"): a visible ASCII first character is
  // never whitespace. Anything else goes to trim(), which knows every Unicode space (NBSP, \v, U+2028…).
  const firstCode = text.charCodeAt(0);
  if (firstCode > 0x20 && firstCode < 0x7f) return false;
  return text.trim() === "";
}

/** Pushes buf[start..end) as a text item unless it is blank; a CR before the line end is dropped. */
function emitText(out: SplitItem[], buf: Buffer, start: number, end: number): void {
  if (end > start && buf[end - 1] === CR) end--;
  if (end <= start) return;
  const text = buf.toString("utf8", start, end);
  if (!isBlank(text)) out.push({ text });
}

/** One complete line buf[start..end): text, or a truncated item when it is over `max` bytes. */
function emitLine(out: SplitItem[], buf: Buffer, start: number, end: number, max: number): void {
  let contentEnd = end;
  if (contentEnd > start && buf[contentEnd - 1] === CR) contentEnd--;
  if (contentEnd - start > max) {
    const hash = createHash("sha256").update(buf.subarray(start, contentEnd));
    out.push({ truncated: true, byteLength: contentEnd - start, sha256: hash.digest("hex") });
    return;
  }
  emitText(out, buf, start, end);
}

/**
 * Every line of buf[start..end), decoded with one toString and split: the splitter's hot loop (one
 * decode per chunk, not per line). The caller has checked that no line here can be over the limit.
 */
function decodeLines(out: SplitItem[], buf: Buffer, start: number, end: number): void {
  const lines = buf.toString("utf8", start, end).split("\n");
  for (let index = 0; index < lines.length; index++) {
    let text = lines[index]!;
    if (text.charCodeAt(text.length - 1) === CR) text = text.slice(0, -1);
    if (text.length !== 0 && !isBlank(text)) out.push({ text });
  }
}

/** The line still waiting for its newline: its pieces while small, a running hash once too long. */
class PendingLine {
  readonly #max: number;
  #pieces: Buffer[] = [];
  #bytes = 0;
  #hash: Hash | null = null;
  #hashedBytes = 0;
  // While hashing, a trailing CR is held back until we know whether the line ends right after it.
  #heldCR = false;

  constructor(max: number) {
    this.#max = max;
  }

  get empty(): boolean {
    return this.#pieces.length === 0 && this.#hash === null;
  }

  /** Adds buf[start..end) to the line. */
  add(buf: Buffer, start: number, end: number): void {
    if (end <= start) return;
    if (this.#hash !== null) {
      this.#feedHash(buf, start, end);
      return;
    }
    // Copy: the caller may reuse its chunk buffer after push returns.
    this.#pieces.push(Buffer.from(buf.subarray(start, end)));
    this.#bytes += end - start;
    // +1 leaves room for a CR that may turn out to be part of a CRLF ending.
    if (this.#bytes > this.#max + 1) this.#startHashing();
  }

  /** Ends the line with buf[0..end) as its tail (buf is null at the end of input) and emits it. */
  finish(out: SplitItem[], buf: Buffer | null, end: number): void {
    if (this.#hash !== null) {
      if (buf !== null) this.#feedHash(buf, 0, end);
      // A held CR right before the line end is the CRLF ending: drop it.
      out.push({ truncated: true, byteLength: this.#hashedBytes, sha256: this.#hash.digest("hex") });
      this.#hash = null;
      this.#hashedBytes = 0;
      this.#heldCR = false;
      return;
    }
    let whole: Buffer;
    if (this.#pieces.length === 0) {
      if (buf === null) return;
      whole = buf.subarray(0, end);
    } else {
      if (buf !== null && end > 0) this.#pieces.push(buf.subarray(0, end));
      whole = this.#pieces.length === 1 ? this.#pieces[0]! : Buffer.concat(this.#pieces);
    }
    this.#pieces = [];
    this.#bytes = 0;
    emitLine(out, whole, 0, whole.length, this.#max);
  }

  #startHashing(): void {
    this.#hash = createHash("sha256");
    this.#hashedBytes = 0;
    this.#heldCR = false;
    for (const piece of this.#pieces) this.#feedHash(piece, 0, piece.length);
    this.#pieces = [];
    this.#bytes = 0;
  }

  #feedHash(buf: Buffer, start: number, end: number): void {
    if (end <= start) return;
    if (this.#heldCR) {
      this.#hash!.update(Buffer.of(CR));
      this.#hashedBytes++;
      this.#heldCR = false;
    }
    if (buf[end - 1] === CR) {
      this.#heldCR = true;
      end--;
    }
    if (end > start) {
      this.#hash!.update(buf.subarray(start, end));
      this.#hashedBytes += end - start;
    }
  }
}

class ChunkLineSplitter implements LineSplitter {
  readonly #max: number;
  readonly #pending: PendingLine;

  constructor(max: number) {
    this.#max = max;
    this.#pending = new PendingLine(max);
  }

  push(chunk: Uint8Array): SplitItem[] {
    const buf = asBuffer(chunk);
    const out: SplitItem[] = [];
    const nl = buf.indexOf(LF, 0);
    if (nl === -1) {
      this.#pending.add(buf, 0, buf.length);
      return out;
    }
    let pos = 0;
    if (!this.#pending.empty) {
      this.#pending.finish(out, buf, nl);
      pos = nl + 1;
    }
    pos = this.#completeLines(out, buf, pos);
    this.#pending.add(buf, pos, buf.length);
    return out;
  }

  end(): SplitItem[] {
    const out: SplitItem[] = [];
    if (!this.#pending.empty) this.#pending.finish(out, null, 0);
    return out;
  }

  /** Emits every complete line of buf from pos on; returns where the unterminated rest begins. */
  #completeLines(out: SplitItem[], buf: Buffer, pos: number): number {
    const last = buf.lastIndexOf(LF);
    if (last < pos) return pos;
    // Fast path: no line here can be too long, so decode every complete line at once.
    if (last - pos <= this.#max) {
      decodeLines(out, buf, pos, last);
      return last + 1;
    }
    for (let nl = buf.indexOf(LF, pos); nl !== -1; nl = buf.indexOf(LF, pos)) {
      emitLine(out, buf, pos, nl, this.#max);
      pos = nl + 1;
    }
    return pos;
  }
}

/**
 * An incremental splitter of stdout chunks into lines: any chunking gives the same lines, and a line over the limit
 * becomes a truncated record, so memory stays bounded.
 */
export function createLineSplitter(options: LineSplitterOptions = {}): LineSplitter {
  const max = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  if (!Number.isInteger(max) || max < 1) {
    throw new RangeError(`maxLineBytes must be a positive integer, got ${String(max)}`);
  }
  return new ChunkLineSplitter(max);
}
