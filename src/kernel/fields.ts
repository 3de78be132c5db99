// Readers for values of unknown shape (parsed JSON, error objects): each answers "the field if it has
// this type, else undefined", so callers never cast and a missing field reads like a wrong one.

export type Obj = Record<string, unknown>;

/** A plain object (not null, not an array). */
export function isObj(v: unknown): v is Obj {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

export function stringField(o: Obj | undefined, key: string): string | undefined {
  const v = o?.[key];
  return typeof v === "string" ? v : undefined;
}

/** A finite number (NaN and infinities read as absent). */
export function numberField(o: Obj | undefined, key: string): number | undefined {
  const v = o?.[key];
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

/** The field when it is a plain object. */
export function objField(o: Obj | undefined, key: string): Obj | undefined {
  const v = o?.[key];
  return isObj(v) ? v : undefined;
}
