// Deterministic filler for benchmark payloads: the same seed gives the same bytes, so runs compare.
export const WORDS =
  "the of and to in is that for it with as was on be by this are from at or an file line code function return value error test run build".split(
    " ",
  );

export function textSource(seed: number): { rand(): number; text(bytes: number): string } {
  let state = seed;
  const rand = (): number => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 0x100000000;
  };
  const text = (bytes: number): string => {
    let words = "";
    while (words.length < bytes) words += WORDS[Math.floor(rand() * WORDS.length)] + (rand() < 0.1 ? "\\n" : " ");
    return words.slice(0, bytes);
  };
  return { rand, text };
}
