// forTerminal: every control, bidi and invisible format character becomes a visible escape; newlines
// and tabs stay only in a multi-line block; ordinary text (accents, CJK, emoji) is left alone.
import { test } from "node:test";
import assert from "node:assert/strict";
import { forTerminal, unsafeCharacter } from "../../src/kernel/index.ts";

test("forTerminal escapes C0, DEL, C1, CR, ESC, bidi overrides and isolates, marks and zero-width characters", () => {
  const cases: Array<[string, string]> = [
    ["\u001b[2K\rrm -rf ~", "\\x1b[2K\\rrm -rf ~"],
    ["a\u0000b\u0007c\u007fd", "a\\x00b\\x07c\\x7fd"],
    ["C1 CSI \u009b31m and NEL \u0085", "C1 CSI \\x9b31m and NEL \\x85"],
    ["\u202a\u202b\u202c\u202d\u202e", "\\u202a\\u202b\\u202c\\u202d\\u202e"],
    ["\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069"],
    ["\u200e\u200f\u061c", "\\u200e\\u200f\\u061c"],
    ["zero\u200bwidth\u2060joiner\ufeff soft\u00adhyphen", "zero\\u200bwidth\\u2060joiner\\ufeff soft\\xadhyphen"],
    ["line\u2028para\u2029", "line\\u2028para\\u2029"],
    ["one\ntwo\tthree", "one\\ntwo\\tthree"],
  ];
  for (const [raw, shown] of cases) assert.equal(forTerminal(raw), shown, JSON.stringify(raw));
  assert.equal(forTerminal("one\n\ttwo\r\n\u001b[1A"), "one\\n\\ttwo\\r\\n\\x1b[1A");
  assert.equal(forTerminal("one\n\ttwo\r\n\u001b[1A", { multiline: true }), "one\n\ttwo\\r\n\\x1b[1A");
});

test("forTerminal leaves printable text of any script alone", () => {
  const text = "café – 東京 👍 ✓ \\x1b is already text";
  assert.equal(forTerminal(text), text);
  assert.equal(unsafeCharacter(text), undefined);
});

test("unsafeCharacter names the first character forTerminal would escape", () => {
  assert.deepEqual(unsafeCharacter("ls\n-la"), { index: 2, escaped: "\\n" });
  assert.equal(unsafeCharacter("ls\n\t-la", { multiline: true }), undefined);
  assert.deepEqual(unsafeCharacter("ls\n-la \u202e", { multiline: true }), { index: 7, escaped: "\\u202e" });
});
