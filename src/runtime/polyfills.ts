// Fixes to the JavaScript runtime that libp2p and Cohort's timeouts rely on; import this module
// before anything from libp2p.
//
// libp2p 3.x calls Promise.withResolvers (Node 22+). Cohort supports Node >= 20.19 for the headless
// node and tests, and Electron bundles Node 22+, so this shim only ever fills the gap on Node 20.
declare global {
  interface PromiseConstructor {
    withResolvers<T>(): { promise: Promise<T>; resolve: (value: T | PromiseLike<T>) => void; reject: (reason?: unknown) => void };
  }
}

if (typeof Promise.withResolvers !== 'function') {
  Object.defineProperty(Promise, 'withResolvers', {
    configurable: true,
    writable: true,
    value: function withResolvers<T>() {
      let resolve!: (value: T | PromiseLike<T>) => void;
      let reject!: (reason?: unknown) => void;
      const promise = new Promise<T>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      return { promise, resolve, reject };
    },
  });
}

// Node's AbortSignal.timeout() is referenced only weakly by its own timer and by AbortSignal.any()
// composites (Node 20 at least): if the garbage collector runs before the deadline, the timeout
// silently never fires and whatever waited on it (an all-reduce deadline, a dial inside libp2p)
// hangs forever. Keeping each timeout signal strongly referenced until it fires makes deadlines
// hold; the cost is what a plain setTimeout costs.
const KEEPS_ALIVE = Symbol.for('cohort.timeoutKeepsAlive');
// eslint-disable-next-line @typescript-eslint/unbound-method -- only looks for the marker on the function, never calls it
if (!(KEEPS_ALIVE in AbortSignal.timeout)) {
  const pending = new Set<AbortSignal>();
  const nativeTimeout = AbortSignal.timeout.bind(AbortSignal);
  const timeout = (ms: number): AbortSignal => {
    const signal = nativeTimeout(ms);
    pending.add(signal);
    signal.addEventListener('abort', () => pending.delete(signal), { once: true });
    return signal;
  };
  Object.defineProperty(timeout, KEEPS_ALIVE, { value: true });
  Object.defineProperty(AbortSignal, 'timeout', { configurable: true, writable: true, value: timeout });
}

export {};
