// A bound on how long a caller waits for an answer (a readiness check, a gauge read): the work itself
// goes on, only the wait ends.

/** Settles like `p`, or after `ms` rejects with an Error whose message is `message`. */
export function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
