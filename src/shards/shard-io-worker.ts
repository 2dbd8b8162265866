// Worker thread: moves shard blobs in and out of the store (src/shards/shard-io.ts) on its own
// connection per database file, so a 2 MB SQLite write or read does not stall the event loop that
// runs the libp2p streams.
import path from 'node:path';
import { parentPort } from 'node:worker_threads';
import { DatasetStore } from '../data/dataset-store.js';
import { openDatabase } from '../store/database.js';

export type ToShardIo =
  | { readonly id: number; readonly op: 'put'; readonly dbFile: string; readonly cacheKey: string; readonly seq: number; readonly data: Uint8Array; readonly examples: number; readonly tokens: number; readonly sha256: string }
  | { readonly id: number; readonly op: 'read'; readonly dbFile: string; readonly sha256: string };

export type FromShardIo = { readonly id: number; readonly data?: Uint8Array } | { readonly id: number; readonly error: string };

const port = parentPort!;
const stores = new Map<string, DatasetStore>();

/** The node's store has `dbFile` open already (OpenDatabaseOptions.alreadyOpen). */
function storeOf(dbFile: string): DatasetStore {
  let datasets = stores.get(dbFile);
  if (datasets === undefined) stores.set(dbFile, (datasets = new DatasetStore(openDatabase(path.dirname(dbFile), { alreadyOpen: true }))));
  return datasets;
}

port.on('message', (m: ToShardIo) => {
  try {
    const datasets = storeOf(m.dbFile);
    if (m.op === 'put') {
      datasets.putShard(m.cacheKey, m.seq, { data: m.data, examples: m.examples, tokens: m.tokens, sha256: m.sha256 });
      // the buffer goes back for the next shard: reusing memory already mapped is far cheaper than fresh pages
      port.postMessage({ id: m.id, data: m.data } satisfies FromShardIo, [m.data.buffer as ArrayBuffer]);
      return;
    }
    const data = datasets.shardBySha256(m.sha256);
    const whole = data !== undefined && data.byteOffset === 0 && data.byteLength === data.buffer.byteLength;
    port.postMessage({ id: m.id, data } satisfies FromShardIo, whole ? [data.buffer as ArrayBuffer] : []);
  } catch (err) {
    port.postMessage({ id: m.id, error: (err as Error).message } satisfies FromShardIo);
  }
});
