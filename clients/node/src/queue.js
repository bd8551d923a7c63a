// An unbounded async queue: the reader pushes without ever waiting, so a slow
// consumer never stalls the connection; consumers take in order.

export class AsyncQueue {
  constructor() {
    /** @type {unknown[]} */
    this.items = [];
    /** @type {((item: unknown) => void)[]} */
    this.waiters = [];
  }

  push(item) {
    const waiter = this.waiters.shift();
    if (waiter) waiter(item);
    else this.items.push(item);
  }

  /** The next item, waiting for it if none is queued. */
  take() {
    if (this.items.length) return Promise.resolve(this.items.shift());
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /**
   * The next item, or `timeout` if none arrives within `ms`. A timed-out take
   * leaves no waiter behind, so no item is lost to it.
   */
  takeWithin(ms, timeout) {
    if (this.items.length) return Promise.resolve(this.items.shift());
    return new Promise((resolve) => {
      const waiter = (item) => {
        clearTimeout(timer);
        resolve(item);
      };
      const timer = setTimeout(() => {
        const at = this.waiters.indexOf(waiter);
        if (at !== -1) this.waiters.splice(at, 1);
        resolve(timeout);
      }, ms);
      this.waiters.push(waiter);
    });
  }
}
