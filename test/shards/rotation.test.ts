// A peer within a cache quota (`--cache-quota`) on real libp2p nodes: it holds a random subset of the
// run's shards that fits, and as it trains through them (a real batch stream reading its store) it
// drops each shard it trained on for one it has not held, staying within the quota throughout.
import assert from 'node:assert/strict';
import test from 'node:test';
import { pino } from 'pino';
import { DatasetStore } from '../../src/data/dataset-store.js';
import { prepareDataset } from '../../src/data/prepare.js';
import { openBatchStream } from '../../src/data/stream.js';
import { fetchDataset, serveShards, ShardRotation } from '../../src/shards/index.js';
import { openStore } from '../../src/store/index.js';
import { startSwarm, waitFor } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

const quiet = pino({ level: 'silent' });

test('within a cache quota a peer trains through more shards than it can hold: each one trained on is swapped for a new one, and the store never holds more than the quota', { timeout: 180_000 }, async (t) => {
  const [seederNode, node] = await startSwarm(t, 2, { runId: 'rotation-test' });
  const [seeder, peer] = [seederNode!, node!].map((n) => {
    const dataDir = tmpDir(t);
    const store = openStore(dataDir);
    t.after(() => store.close());
    return { node: n, store, dataDir };
  });
  const info = (await prepareDataset({ store: seeder!.store, dataDir: seeder!.dataDir, source: 'bundled', maxDocuments: 6, vocabSize: 1500, shardExamples: 6 })).info;
  const seederServing = serveShards(seeder!.node, seeder!.store, quiet);
  t.after(() => seederServing.release());
  await seederServing.ready;

  const quota = Math.floor(info.bytes / 3);
  const fetched = await fetchDataset(peer!.node, peer!.store, { datasetId: info.datasetId!, dataDir: peer!.dataDir, quotaBytes: quota, log: quiet });
  const datasets = new DatasetStore(peer!.store.db);
  const heldBytes = () => datasets.shardEntries(fetched.info.cacheKey).reduce((n, s) => n + s.bytes, 0);
  const first = new Set(datasets.shardEntries(fetched.info.cacheKey).map((s) => s.seq));
  assert.ok(first.size >= 2 && first.size < info.shardCount && heldBytes() <= quota, `a subset within the quota: ${first.size} of ${info.shardCount} shards, ${heldBytes()} of ${quota} bytes`);

  const serving = serveShards(peer!.node, peer!.store, quiet);
  t.after(() => serving.release());
  await serving.ready;
  const rotation = new ShardRotation(peer!.node, peer!.store, { cacheKey: fetched.info.cacheKey, quotaBytes: quota, dataDir: peer!.dataDir, log: quiet, advertise: () => serving.advertise() });
  const trained = new Set<number>();
  const stream = openBatchStream({
    store: peer!.store,
    cacheKey: fetched.info.cacheKey,
    batchSize: 8,
    seed: 1,
    peerId: peer!.node.peerId.toString(),
    worker: false,
    onShardsTrained: (seqs) => {
      for (const s of seqs) trained.add(s);
      rotation.trained(seqs);
    },
  });
  let overQuota = 0;
  try {
    // "training": batches read one after another until it has trained on every shard (bounded)
    await waitFor('the peer to train through every shard of the dataset', async () => {
      await stream.next();
      if (heldBytes() > quota) overQuota++;
      return trained.size === info.shardCount;
    }, 120_000);
  } finally {
    await rotation.stop();
    await stream.close();
  }
  assert.equal(overQuota, 0, 'the store never held more than the quota');
  assert.ok(rotation.swapped >= info.shardCount - first.size, `${rotation.swapped} swaps`);
  const now = new Set(datasets.shardEntries(fetched.info.cacheKey).map((s) => s.seq));
  assert.notDeepEqual(now, first, 'it holds other shards than it started with');
  // every shard it holds is the seeder's, byte for byte (verified on arrival), and the seeder keeps all
  assert.equal(new DatasetStore(seeder!.store.db).shardEntries(info.cacheKey).length, info.shardCount);
  for (const s of datasets.shardEntries(fetched.info.cacheKey)) assert.equal(s.sha256, fetched.manifest.shards[s.seq]!.sha256);
});
