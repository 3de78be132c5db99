/** JSON with object keys sorted, so equal values print alike whatever order their keys were set in. */
export function stableJson(value: unknown): string {
  const sorted = (_key: string, v: unknown): unknown =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : v;
  return JSON.stringify(value, sorted) ?? "null";
}
