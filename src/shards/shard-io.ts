import type { Worker } from 'node:worker_threads';
import type { Store } from '../store/index.js';
import { siblingEntry, startWorker } from '../util/worker-thread.js';
import type { FromShardIo, ToShardIo } from './shard-io-worker.js';

/** A worker with nothing to do for this long ends (it is started again on the next request). */
const IDLE_MS = 10_000;

type Request = ToShardIo extends infer M ? (M extends ToShardIo ? Omit<M, 'id'> : never) : never;

/** One worker thread and the requests it has not answered yet. */
class IoWorker {
  private readonly worker: Worker;
  private readonly pending = new Map<number, { resolve: (data: Uint8Array | undefined) => void; reject: (err: Error) => void }>();
  private nextId = 0;
  private idle: NodeJS.Timeout | undefined;
  ended = false;

  constructor() {
    this.worker = startWorker(siblingEntry(import.meta.url, 'shard-io-worker'));
    this.worker.on('message', (m: FromShardIo) => {
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      if ('error' in m) p?.reject(new Error(m.error));
      else p?.resolve(m.data);
      if (this.pending.size > 0) return;
      // nothing in flight: the process may exit, and the thread ends after a while
      this.worker.unref();
      this.idle = setTimeout(() => this.end(), IDLE_MS);
      this.idle.unref();
    });
    this.worker.on('error', (err) => this.fail(new Error(`the shard store worker failed: ${err.message}`, { cause: err })));
    this.worker.on('exit', (code) => this.fail(new Error(`the shard store worker exited (code ${code})`)));
  }

  request(message: Request, transfer: ArrayBuffer[]): Promise<Uint8Array | undefined> {
    clearTimeout(this.idle);
    this.worker.ref();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ ...message, id }, transfer);
    });
  }

  private end(): void {
    this.ended = true;
    void this.worker.terminate();
  }

  private fail(err: Error): void {
    this.ended = true;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}

let current: IoWorker | undefined;

function request(message: Request, transfer: ArrayBuffer[] = []): Promise<Uint8Array | undefined> {
  if (current === undefined || current.ended) current = new IoWorker();
  return current.request(message, transfer);
}

/**
 * Stores a verified shard and recounts its dataset (DatasetStore.putShard, one transaction) on a
 * worker thread with its own connection to `store`'s file: a 2 MB SQLite write would otherwise hold
 * the event loop that runs every libp2p stream. `data`'s ArrayBuffer (the caller's own, not a shared
 * pool's) is moved there rather than copied, and handed back once the shard is stored, for the next
 * one (writing into fresh memory costs a page fault per 4 KiB): the caller must not use it meanwhile.
 */
export async function putShardOffThread(store: Store, cacheKey: string, seq: number, shard: { data: Uint8Array; examples: number; tokens: number; sha256: string }): Promise<ArrayBuffer> {
  const { buffer } = shard.data;
  if (!(buffer instanceof ArrayBuffer)) throw new TypeError(`shard ${seq} of dataset ${cacheKey} lies in shared memory, which cannot be moved to the store's worker`);
  try {
    const back = await request({ op: 'put', dbFile: store.file, cacheKey, seq, ...shard }, [buffer]);
    return back!.buffer as ArrayBuffer;
  } catch (err) {
    throw new Error(`could not store shard ${seq} of dataset ${cacheKey} in ${store.file}: ${(err as Error).message}`, { cause: err });
  }
}

/** A shard's bytes by sha256 (DatasetStore.shardBySha256), read on the worker thread; undefined when the store holds none. */
export async function readShardOffThread(store: Store, sha256: string): Promise<Uint8Array | undefined> {
  try {
    return await request({ op: 'read', dbFile: store.file, sha256 });
  } catch (err) {
    throw new Error(`could not read shard ${sha256.slice(0, 12)}… from ${store.file}: ${(err as Error).message}`, { cause: err });
  }
}
