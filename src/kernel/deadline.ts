// Bounded waits: on an answer (a readiness check, a gauge read: the work itself goes on, only the wait
// ends), and a pause that a caller's abort cuts short.

/** Settles like `p`, or after `ms` rejects with an Error whose message is `message`. */
export function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Waits `ms`: true when the time passed, false as soon as `signal` aborts (at once if it had). */
export function waitUnlessAborted(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (signal?.aborted === true) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", done);
      resolve(true);
    }, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
