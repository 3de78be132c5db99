// A stored entry's envelope field `e` is JSON whose leading keys encode() writes first and in this
// order: v, turn, attempt, epoch, at, kind; `data` (the bulk) comes after them. Scans that only need
// those (which turn, which kind) read them here without parsing the data.

export interface StoredHead {
  turn: string;
  attempt: number;
  epoch: number;
  at: string;
  kind: string;
}

const HEAD = /^\{"v":\d+,"turn":("(?:[^"\\]|\\.)*"),"attempt":(\d+),"epoch":(\d+),"at":"([^"]*)","kind":"([^"\\]*)"/;

/** The `e` field of a stream entry's field list. */
export function storedEnvelope(fields: readonly string[]): string | undefined {
  for (let index = 0; index + 1 < fields.length; index += 2) if (fields[index] === "e") return fields[index + 1];
  return undefined;
}

/** The head of a stored envelope; undefined when it is not in the written shape (then parse it whole). */
export function storedHead(env: string | undefined): StoredHead | undefined {
  const match = env === undefined ? null : HEAD.exec(env);
  if (match === null) return undefined;
  return {
    turn: JSON.parse(match[1]!) as string,
    attempt: Number(match[2]),
    epoch: Number(match[3]),
    at: match[4]!,
    kind: match[5]!,
  };
}
