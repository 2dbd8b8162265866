import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * The worker entry `name` next to the module at `moduleUrl`: `name.ts` when that module runs from
 * source under tsx, `name.js` in the Electron build (electron.vite.config.ts bundles each worker
 * entry as out/main/<name>.js, next to the code that starts it).
 */
export function siblingEntry(moduleUrl: string, name: string): URL {
  return new URL(`./${name}.${moduleUrl.endsWith('.ts') ? 'ts' : 'js'}`, moduleUrl);
}

/**
 * Starts a worker thread on `entry`. Node 20 applies no `--import tsx` to a worker's entry, so a
 * TypeScript entry (tests, the CLI) is loaded by a small eval entry that registers tsx's loader
 * first, as bin/cohort.js does for the main thread.
 */
export function startWorker(entry: URL, options: Pick<WorkerOptions, 'workerData'> = {}): Worker {
  if (!entry.pathname.endsWith('.ts')) return new Worker(entry, options);
  const bootstrap = `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((m) => { m.register(); return import(${JSON.stringify(entry.href)}); })`;
  return new Worker(bootstrap, { ...options, eval: true, execArgv: [] });
}

/** `[data.buffer]` when `data` owns its whole ArrayBuffer, so posting it moves the buffer (detached here) instead of copying it. */
export function ownBuffer(data: Uint8Array): ArrayBuffer[] {
  return data.byteOffset === 0 && data.byteLength === data.buffer.byteLength && data.buffer instanceof ArrayBuffer ? [data.buffer] : [];
}

interface OpenRequest<Answer> {
  resolve(answer: Answer): void;
  reject(err: Error): void;
}

/**
 * A worker thread answering requests: each is posted with an id, and the worker posts one reply
 * with that id (`error`: the request failed there); messages without an id are notices (`onNotice`).
 * The worker keeps the process alive only while a request is open; `idleMs` after the last one it
 * ends. When it fails or exits, every open request is rejected and `ended` is set: start another.
 */
export class RequestWorker<Request extends object, Reply extends { readonly id: number }, Notice extends object = never> {
  private readonly worker: Worker;
  private readonly open = new Map<number, OpenRequest<Exclude<Reply, { error: string }>>>();
  private readonly drained: (() => void)[] = [];
  private nextId = 0;
  private idle: NodeJS.Timeout | undefined;
  ended = false;

  constructor(
    entry: URL,
    private readonly o: { readonly name: string; readonly workerData?: unknown; readonly idleMs?: number; readonly onNotice?: (notice: Notice) => void },
  ) {
    this.worker = startWorker(entry, { workerData: o.workerData });
    this.worker.unref();
    this.worker.on('message', (m: Reply | Notice) => {
      if (!('id' in m)) return this.o.onNotice?.(m);
      const request = this.settle(m.id);
      if ('error' in m) request?.reject(new Error(String(m.error)));
      else request?.resolve(m as Exclude<Reply, { error: string }>);
    });
    this.worker.on('error', (err) => this.fail(new Error(`the ${o.name} failed: ${err.message}`, { cause: err })));
    this.worker.on('exit', (code) => this.fail(new Error(`the ${o.name} exited (code ${code})`)));
  }

  request(message: Request, transfer: readonly ArrayBuffer[] = []): Promise<Exclude<Reply, { error: string }>> {
    clearTimeout(this.idle);
    this.worker.ref();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.open.set(id, { resolve, reject });
      this.worker.postMessage({ ...message, id }, transfer);
    });
  }

  /** Ends the worker once no request is open. */
  async close(): Promise<void> {
    if (this.open.size > 0) await new Promise<void>((resolve) => this.drained.push(resolve));
    this.ended = true;
    await this.worker.terminate();
  }

  /** Request `id`, no longer open. */
  private settle(id: number): OpenRequest<Exclude<Reply, { error: string }>> | undefined {
    const request = this.open.get(id);
    this.open.delete(id);
    if (this.open.size > 0) return request;
    this.worker.unref();
    for (const resolve of this.drained.splice(0)) resolve();
    if (this.o.idleMs !== undefined && !this.ended) {
      this.idle = setTimeout(() => void this.close(), this.o.idleMs);
      this.idle.unref();
    }
    return request;
  }

  private fail(err: Error): void {
    this.ended = true;
    clearTimeout(this.idle);
    for (const id of [...this.open.keys()]) this.settle(id)?.reject(err);
  }
}
