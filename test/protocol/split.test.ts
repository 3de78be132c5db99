import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import fc from "fast-check";
import { createLineSplitter, parseItem, truncatedLine, type SplitItem } from "../../src/protocol/index.ts";

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);

function splitAll(bytes: Uint8Array, cuts: number[], maxLineBytes?: number): SplitItem[] {
  const splitter = createLineSplitter({ maxLineBytes });
  const out: SplitItem[] = [];
  let prev = 0;
  for (const cut of [...new Set(cuts)].filter((c) => c > 0 && c < bytes.length).sort((a, b) => a - b)) {
    out.push(...splitter.push(bytes.subarray(prev, cut)));
    prev = cut;
  }
  out.push(...splitter.push(bytes.subarray(prev)));
  out.push(...splitter.end());
  return out;
}

test("splits lines, strips CRLF, skips blank lines, flushes the last unterminated line", () => {
  const items = splitAll(enc('{"a":1}\r\n\n   \r\n{"b":2}\n{"c":3}'), []);
  assert.deepEqual(items, [{ text: '{"a":1}' }, { text: '{"b":2}' }, { text: '{"c":3}' }]);
});

test("a UTF-8 sequence split across chunks is decoded whole", () => {
  const bytes = enc('{"t":"héllo 😀 ✓"}\n');
  for (let cut = 1; cut < bytes.length; cut++) {
    assert.deepEqual(splitAll(bytes, [cut]), [{ text: '{"t":"héllo 😀 ✓"}' }], `cut at ${cut}`);
  }
});

test("a line above maxLineBytes becomes a truncated item with its byte length and sha256", () => {
  const long = "x".repeat(50);
  const bytes = enc(`short\r\n${long}\r\nafter\n`);
  const expected = [
    { text: "short" },
    { truncated: true, byteLength: 50, sha256: createHash("sha256").update(long).digest("hex") },
    { text: "after" },
  ];
  for (let cut = 0; cut < bytes.length; cut++) {
    assert.deepEqual(splitAll(bytes, [cut, cut + 3, cut + 17], 49), expected, `cuts at ${cut}`);
  }
  // exactly at the limit the line is kept
  assert.deepEqual(splitAll(enc(`${"y".repeat(50)}\r\n`), [], 50), [{ text: "y".repeat(50) }]);
  assert.equal("truncated" in splitAll(enc(`${"y".repeat(51)}\r\n`), [10, 20, 51], 50)[0]!, true);
});

test("truncatedLine and parseItem give a truncated ParsedLine", () => {
  const parsed = truncatedLine({ truncated: true, byteLength: 9, sha256: "ab" });
  assert.deepEqual(parsed, { category: "truncated", raw: "", type: "truncated", byteLength: 9, sha256: "ab" });
  assert.equal(parseItem({ truncated: true, byteLength: 9, sha256: "ab" }).category, "truncated");
  assert.equal(parseItem({ text: "{}" }).category, "unknown");
});

test("a caller reusing its chunk buffer does not corrupt a pending line", () => {
  const splitter = createLineSplitter();
  const buf = Buffer.from('{"a":');
  const out = splitter.push(buf);
  buf.fill(0x20);
  out.push(...splitter.push(enc("1}\n")));
  assert.deepEqual(out, [{ text: '{"a":1}' }]);
});

test("memory stays bounded: a 5 MB line with a 1 KB limit is hashed, not kept", () => {
  const splitter = createLineSplitter({ maxLineBytes: 1024 });
  const piece = new Uint8Array(64 * 1024).fill(0x61);
  const hash = createHash("sha256");
  for (let index = 0; index < 80; index++) {
    assert.deepEqual(splitter.push(piece), []);
    hash.update(piece);
  }
  assert.deepEqual(splitter.push(enc("\n")), [
    { truncated: true, byteLength: 80 * 64 * 1024, sha256: hash.digest("hex") },
  ]);
});

// Property: any chunking yields the same items as one push, and each item keeps its bytes.
const lineArb = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.json({ maxDepth: 2 }),
  fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b).toString("latin1")),
  fc.constant('{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"ü"}]}'),
  fc.constant(" "),
  fc.constant(""),
);

test("fuzz: random chunkings of random bytes give identical items", () => {
  fc.assert(
    fc.property(
      fc.uint8Array({ maxLength: 300 }),
      fc.array(fc.nat(300), { maxLength: 12 }),
      fc.integer({ min: 1, max: 64 }),
      (bytes, cuts, max) => {
        const whole = splitAll(bytes, [], max);
        assert.deepEqual(splitAll(bytes, cuts, max), whole);
        // byte-for-byte: one byte per push
        assert.deepEqual(
          splitAll(
            bytes,
            Array.from({ length: bytes.length }, (_, i) => i),
            max,
          ),
          whole,
        );
      },
    ),
    { numRuns: 300 },
  );
});

test("fuzz: lines keep their bytes (text decoded exactly, truncated ones hashed right)", () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(lineArb, fc.boolean()), { maxLength: 12 }),
      fc.array(fc.nat(600), { maxLength: 10 }),
      fc.integer({ min: 4, max: 80 }),
      (lines, cuts, max) => {
        const texts = lines.map(([line]) => line.replaceAll("\n", " ").replaceAll("\r", " "));
        const joined = lines.map(([, crlf], i) => texts[i] + (crlf ? "\r\n" : "\n")).join("");
        const bytes = enc(joined);
        const items = splitAll(bytes, cuts, max);
        const expected = texts
          .filter((t) => t.trim() !== "")
          .map((text): SplitItem => {
            const encoded = Buffer.from(text);
            if (encoded.length > max)
              return {
                truncated: true,
                byteLength: encoded.length,
                sha256: createHash("sha256").update(encoded).digest("hex"),
              };
            return { text };
          });
        assert.deepEqual(items, expected);
        for (const item of items) {
          const parsed = parseItem(item);
          if ("text" in item) assert.equal(parsed.raw, item.text);
          else assert.equal(parsed.category, "truncated");
        }
      },
    ),
    { numRuns: 300 },
  );
});

test("lines of Unicode whitespace only (NBSP, vertical tab, U+2028, ideographic space) are blank and skipped", () => {
  for (const ws of ["\u00a0", "\u000b", "\u000c", "\u2028", "\u3000", " \u00a0\t"]) {
    const splitter = createLineSplitter({ maxLineBytes: 4 });
    assert.deepEqual([...splitter.push(enc(`${ws}\n`)), ...splitter.end()], [], JSON.stringify(ws));
  }
});
