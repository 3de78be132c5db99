// A single-consumer async queue: the producer never waits, so the run's outcome never depends on
// whether anyone iterates the lines.
export class Channel<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiter: ((result: IteratorResult<T>) => void) | undefined;
  private ended = false;
  private taken = false;

  push(item: T): void {
    if (this.ended) return;
    const waiter = this.waiter;
    if (waiter !== undefined) {
      this.waiter = undefined;
      waiter({ value: item, done: false });
    } else this.items.push(item);
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.taken) throw new Error("this iterable can be consumed once");
    this.taken = true;
    return {
      next: () => {
        if (this.items.length > 0) return Promise.resolve({ value: this.items.shift()!, done: false });
        if (this.ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => {
          this.waiter = resolve;
        });
      },
      return: () => {
        // The consumer stopped early: drop what is buffered, keep accepting (and discarding) input.
        this.items.length = 0;
        this.ended = true;
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
