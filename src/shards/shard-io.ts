import type { Store } from '../store/index.js';
import { RequestWorker, siblingEntry } from '../util/worker-thread.js';
import type { FromShardIo, ToShardIo } from './shard-io-worker.js';

/** A worker with nothing to do for this long ends (it is started again on the next request). */
const IDLE_MS = 10_000;

type Request = ToShardIo extends infer M ? (M extends ToShardIo ? Omit<M, 'id'> : never) : never;

let current: RequestWorker<Request, FromShardIo> | undefined;

function request(message: Request, transfer: ArrayBuffer[] = []): Promise<Uint8Array | undefined> {
  if (current === undefined || current.ended) current = new RequestWorker(siblingEntry(import.meta.url, 'shard-io-worker'), { name: 'shard store worker', idleMs: IDLE_MS });
  return current.request(message, transfer).then((reply) => reply.data);
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
