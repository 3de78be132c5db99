// Incremental newline splitter for CLI stdout. Works on bytes, so a UTF-8 sequence split across
// chunks is decoded whole (0x0A never occurs inside a multi-byte sequence) and the output is the
// same for any chunking. A line longer than maxLineBytes is not kept: it becomes a `truncated` item
// carrying its byte length and sha256, hashed as it arrives so memory stays bounded.
import { createHash, type Hash } from "node:crypto";

export type SplitItem = { text: string } | { truncated: true; byteLength: number; sha256: string };

export interface LineSplitterOptions {
  /** Lines above this many bytes (without the line ending) become truncated items. Default 64 MiB. */
  maxLineBytes?: number;
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
  const c = text.charCodeAt(0);
  if (c > 0x20 && c < 0x7f) return false;
  return text.trim() === "";
}

/** An incremental splitter of stdout chunks into lines: any chunking gives the same lines, and a line over the limit becomes a truncated record, so memory stays bounded. */
export function createLineSplitter(options: LineSplitterOptions = {}): LineSplitter {
  const max = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  if (!Number.isInteger(max) || max < 1) {
    throw new RangeError(`maxLineBytes must be a positive integer, got ${String(max)}`);
  }
  // The pending (unterminated) line: buffered pieces while small, a running hash once too long.
  let pieces: Buffer[] = [];
  let pendingBytes = 0;
  let hash: Hash | null = null;
  let hashedBytes = 0;
  // In hashing mode a trailing CR is held back until we know whether the line ends right after it.
  let heldCR = false;

  const emitText = (out: SplitItem[], buf: Buffer, start: number, end: number): void => {
    if (end > start && buf[end - 1] === CR) end--;
    if (end <= start) return;
    const text = buf.toString("utf8", start, end);
    if (!isBlank(text)) out.push({ text });
  };

  const startHashing = (): void => {
    hash = createHash("sha256");
    hashedBytes = 0;
    heldCR = false;
    for (const p of pieces) feedHash(p, 0, p.length);
    pieces = [];
    pendingBytes = 0;
  };

  const feedHash = (buf: Buffer, start: number, end: number): void => {
    if (end <= start) return;
    if (heldCR) {
      hash!.update(Buffer.of(CR));
      hashedBytes++;
      heldCR = false;
    }
    if (buf[end - 1] === CR) {
      heldCR = true;
      end--;
    }
    if (end > start) {
      hash!.update(buf.subarray(start, end));
      hashedBytes += end - start;
    }
  };

  const finishPending = (out: SplitItem[], buf: Buffer | null, end: number): void => {
    // `buf[0..end)` is the tail of the pending line (buf may be null at end of input).
    if (hash !== null) {
      if (buf !== null) feedHash(buf, 0, end);
      // A held CR right before the line end is the CRLF ending: drop it.
      out.push({ truncated: true, byteLength: hashedBytes, sha256: hash.digest("hex") });
      hash = null;
      hashedBytes = 0;
      heldCR = false;
      return;
    }
    let whole: Buffer;
    if (pieces.length === 0) {
      if (buf === null) return;
      whole = buf.subarray(0, end);
    } else {
      if (buf !== null && end > 0) pieces.push(buf.subarray(0, end));
      whole = pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
    }
    pieces = [];
    pendingBytes = 0;
    emitLine(out, whole, 0, whole.length);
  };

  const emitLine = (out: SplitItem[], buf: Buffer, start: number, end: number): void => {
    let contentEnd = end;
    if (contentEnd > start && buf[contentEnd - 1] === CR) contentEnd--;
    if (contentEnd - start > max) {
      const h = createHash("sha256").update(buf.subarray(start, contentEnd));
      out.push({ truncated: true, byteLength: contentEnd - start, sha256: h.digest("hex") });
      return;
    }
    emitText(out, buf, start, end);
  };

  const addPending = (buf: Buffer, start: number, end: number): void => {
    if (end <= start) return;
    if (hash !== null) {
      feedHash(buf, start, end);
      return;
    }
    // Copy: the caller may reuse its chunk buffer after push returns.
    pieces.push(Buffer.from(buf.subarray(start, end)));
    pendingBytes += end - start;
    // +1 leaves room for a CR that may turn out to be part of a CRLF ending.
    if (pendingBytes > max + 1) startHashing();
  };

  return {
    push(chunk: Uint8Array): SplitItem[] {
      const buf = asBuffer(chunk);
      const out: SplitItem[] = [];
      let pos = 0;
      let nl = buf.indexOf(LF, 0);
      if (nl === -1) {
        addPending(buf, 0, buf.length);
        return out;
      }
      if (pieces.length > 0 || hash !== null) {
        finishPending(out, buf, nl);
        pos = nl + 1;
        nl = buf.indexOf(LF, pos);
      }
      if (nl !== -1) {
        const last = buf.lastIndexOf(LF);
        if (last - pos <= max) {
          // Fast path: no line here can be too long, so decode every complete line at once.
          const lines = buf.toString("utf8", pos, last).split("\n");
          for (let i = 0; i < lines.length; i++) {
            let text = lines[i]!;
            if (text.charCodeAt(text.length - 1) === 0x0d) text = text.slice(0, -1);
            if (text.length !== 0 && !isBlank(text)) out.push({ text });
          }
          pos = last + 1;
        } else {
          while (nl !== -1) {
            emitLine(out, buf, pos, nl);
            pos = nl + 1;
            nl = buf.indexOf(LF, pos);
          }
        }
      }
      addPending(buf, pos, buf.length);
      return out;
    },
    end(): SplitItem[] {
      const out: SplitItem[] = [];
      if (hash !== null || pieces.length > 0) finishPending(out, null, 0);
      return out;
    },
  };
}
