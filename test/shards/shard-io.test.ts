// The shard store's worker thread (src/shards/shard-io.ts): a fetched shard's buffer is moved there,
// stored, and moved back whole for the next shard; what is stored is what was sent.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import test from 'node:test';
import { DatasetStore } from '../../src/data/dataset-store.js';
import { putShardOffThread, readShardOffThread } from '../../src/shards/shard-io.js';
import { openStore } from '../../src/store/index.js';
import { tmpDir } from '../helpers/tmp.js';

const params = { maxSeqLen: 64, shortSeqProb: 0.1, seed: 0, format: 'swarm', field: '', maxDocuments: null };

test('a shard moved to the store’s worker is stored and counted, and its buffer comes back whole for the next shard', async (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  const datasets = new DatasetStore(store.db);
  datasets.beginFetched({ cacheKey: 'fetched', source: 'test', datasetId: 'a'.repeat(64), manifest: '{}', tokenizerHash: 'b'.repeat(64), tokenizerFile: '/nonexistent', params, vocabSize: 100 });

  // a shard lying at the start of a larger buffer, as a fetch's reused buffers hold a smaller shard
  const buffer = new ArrayBuffer(64 * 1024);
  const data = new Uint8Array(buffer, 0, 40_000);
  data.forEach((_, i) => (data[i] = (i * 7) & 0xff));
  const expected = Buffer.from(data);
  const sha256 = createHash('sha256').update(data).digest('hex');
  const back = await putShardOffThread(store, 'fetched', 0, { data, examples: 3, tokens: 120, sha256 });

  assert.equal(buffer.byteLength, 0, 'the buffer was moved to the worker, not copied');
  assert.equal(back.byteLength, 64 * 1024, 'the whole buffer comes back, usable');
  assert.deepEqual(Buffer.from(back, 0, 40_000), expected, 'its bytes are the shard’s');
  assert.deepEqual(Buffer.from((await readShardOffThread(store, sha256))!), expected, 'the store holds the shard as sent');
  const info = datasets.get('fetched')!;
  assert.deepEqual([info.shardCount, info.examples, info.tokens, info.complete], [1, 3, 120, true]);
});
