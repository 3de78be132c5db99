// A cheap "could this text contain any of these literals?" test (Wu–Manber over character pairs).
// The scan looks at the last two characters of an m-wide window and jumps ahead by as much as no
// anchor allows there, so clean text costs about one table lookup per m-1 characters instead of a
// regex step per character. It only ever rejects text that contains none of the anchors' first m
// characters: callers run their exact matcher on the texts it lets through.
//
// Characters are hashed to 8 bits with ASCII case folded (c | 0x20). Collisions (two-byte
// characters, folded punctuation) can only shorten a jump or add a candidate, never hide a match.

export interface Anchor {
  readonly text: string;
  /** Match ASCII letters in either case (like a non-unicode `i` regex); other characters exactly. */
  readonly ignoreCase?: boolean;
}

export type Prefilter = (text: string) => boolean;

const fold = (c: number): number => (c | 0x20) & 0xff;

/** Anchors of at least 2 characters; windows are at most `maxWindow` wide (longer anchors are cut to their first m characters). */
export function createPrefilter(anchors: readonly Anchor[], maxWindow = 16): Prefilter {
  if (anchors.length === 0) return () => false;
  let m = maxWindow;
  for (const a of anchors) m = Math.min(m, a.text.length);
  if (m < 2) throw new RangeError("prefilter anchors need at least 2 characters");
  const seen = new Set<string>();
  const cut: Array<{ text: string; ci: boolean }> = [];
  for (const a of anchors) {
    const ci = a.ignoreCase === true;
    // ASCII only: `Ł`.toLowerCase() is `ł`, which a non-unicode `i` match would not accept for it
    const text = ci ? a.text.slice(0, m).replace(/[A-Z]/g, (c) => c.toLowerCase()) : a.text.slice(0, m);
    const key = (ci ? "i:" : "s:") + text;
    if (seen.has(key)) continue;
    seen.add(key);
    cut.push({ text, ci });
  }
  const shift = new Uint8Array(65536).fill(m - 1);
  // Anchors whose last pair hashes to a slot: the only ones worth verifying when the scan stops there.
  const buckets = new Map<number, Array<{ text: string; ci: boolean }>>();
  for (const a of cut) {
    for (let j = 0; j < m - 1; j++) {
      const h = (fold(a.text.charCodeAt(j)) << 8) | fold(a.text.charCodeAt(j + 1));
      const s = m - 2 - j;
      if (s < shift[h]!) shift[h] = s;
      if (s === 0) {
        const list = buckets.get(h);
        if (list === undefined) buckets.set(h, [a]);
        else list.push(a);
      }
    }
  }
  const matchesAt = (t: string, start: number, a: { text: string; ci: boolean }): boolean => {
    if (!a.ci) return t.startsWith(a.text, start);
    const p = a.text;
    for (let k = 0; k < m; k++) {
      const want = p.charCodeAt(k);
      const c = t.charCodeAt(start + k);
      if (c === want) continue;
      // only an ASCII letter may differ, and only by case
      if (want < 0x61 || want > 0x7a || c !== want - 0x20) return false;
    }
    return true;
  };
  return (t: string): boolean => {
    const n = t.length;
    let pos = m - 1;
    while (pos < n) {
      const h = (fold(t.charCodeAt(pos - 1)) << 8) | fold(t.charCodeAt(pos));
      const s = shift[h]!;
      if (s !== 0) {
        pos += s;
        continue;
      }
      const start = pos - m + 1;
      for (const a of buckets.get(h)!) if (matchesAt(t, start, a)) return true;
      pos++;
    }
    return false;
  };
}
