// Readers for values of unknown shape (parsed JSON, error objects): each answers "the field if it has
// this type, else undefined", so callers never cast and a missing field reads like a wrong one.

export type Obj = Record<string, unknown>;

/** A plain object (not null, not an array). */
export function isObj(value: unknown): value is Obj {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

export function stringField(record: Obj | undefined, key: string): string | undefined {
  const value = record?.[key];
  return typeof value === "string" ? value : undefined;
}

/** A finite number (NaN and infinities read as absent). */
export function numberField(record: Obj | undefined, key: string): number | undefined {
  const value = record?.[key];
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/** The field when it is a plain object. */
export function objField(record: Obj | undefined, key: string): Obj | undefined {
  const value = record?.[key];
  return isObj(value) ? value : undefined;
}
