// Reading an event's data: the kind's schema decides, so a reader never guesses a field's name or type.
import { eventDataSchemas, type EventData, type EventKind } from "./schemas.ts";

/** Whether turnstream writes this kind (other well-formed kinds are stored and read, never interpreted). */
export function isEventKind(kind: string): kind is EventKind {
  return Object.hasOwn(eventDataSchemas, kind);
}

/** The data of an event as its kind's shape, or undefined when it does not fit (readers count it malformed). */
export function dataOf<K extends EventKind>(kind: K, data: unknown): EventData<K> | undefined {
  const parsed = eventDataSchemas[kind].safeParse(data);
  return parsed.success ? (parsed.data as EventData<K>) : undefined;
}
