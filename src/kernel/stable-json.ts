/** JSON with object keys sorted, so equal values print alike whatever order their keys were set in. */
export function stableJson(value: unknown): string {
  const sorted = (_key: string, node: unknown): unknown =>
    node !== null && typeof node === "object" && !Array.isArray(node)
      ? Object.fromEntries(
          Object.entries(node as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : node;
  return JSON.stringify(value, sorted) ?? "null";
}
