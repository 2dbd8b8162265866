import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import test, { type TestContext } from 'node:test';
import { datasetIdOf } from '../../src/store/dataset-id.js';
import { DatasetStore } from '../../src/data/dataset-store.js';
import { DataError } from '../../src/data/errors.js';
import { prepareDataset, type PrepareOptions } from '../../src/data/prepare.js';
import { openBatchStream } from '../../src/data/stream.js';
import { loadTokenizer } from '../../src/data/tokenizer.js';
import { checkBatch, type AlbertBatch } from '../../src/engine/batch.js';
import { openStore, type Store } from '../../src/store/index.js';
import { MIGRATIONS } from '../../src/store/migrations.js';
import { tryLockFile } from '../../src/store/data-dir-lock.js';
import { migrate } from '../../src/store/sqlite-file.js';
import { tmpDir } from '../helpers/tmp.js';

function setup(t: TestContext): { dataDir: string; store: Store; base: PrepareOptions } {
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  t.after(() => store.close());
  // A slice of the bundled corpus, small shards so there are several.
  return { dataDir, store, base: { store, dataDir, source: 'bundled', maxDocuments: 6, vocabSize: 1500, shardExamples: 25 } };
}

async function take(stream: AsyncIterableIterator<AlbertBatch>, n: number): Promise<AlbertBatch[]> {
  const out: AlbertBatch[] = [];
  for (let i = 0; i < n; i++) {
    const r = await stream.next();
    assert.equal(r.done, false);
    out.push(r.value);
  }
  return out;
}

test('prepare trains a tokenizer next to the data, writes compact shards, and a second prepare reuses them', async (t) => {
  const { dataDir, store, base } = setup(t);
  const first = await prepareDataset(base);
  assert.equal(first.reused, false);
  const info = first.info;
  assert.equal(info.complete, true);
  assert.ok(info.documents === 6 && info.sentences > 100 && info.examples > 100 && info.shardCount > 3, JSON.stringify(info));
  assert.ok(info.tokenizerFile.startsWith(path.join(dataDir, 'data')));
  const tok = loadTokenizer(info.tokenizerFile);
  assert.equal(info.vocabSize, tok.vocabSize);
  assert.equal(info.tokenizerHash, tok.hash);
  const rows = store.db.prepare('SELECT sum(examples) AS e, sum(tokens) AS n, sum(length(data)) AS b, count(*) AS c FROM shards WHERE cache_key = ?').get(info.cacheKey) as { e: number; n: number; b: number; c: number };
  assert.deepEqual([rows.e, rows.n, rows.c], [info.examples, info.tokens, info.shardCount]);
  // uint16 ids plus 5 bytes of lengths and label per example, a little header and padding per shard.
  assert.ok(rows.b <= info.tokens * 2 + info.examples * 5 + info.shardCount * 20, `${rows.b} bytes for ${info.tokens} tokens`);

  const again = await prepareDataset(base);
  assert.equal(again.reused, true);
  assert.equal(again.info.cacheKey, info.cacheKey);
  assert.equal((store.db.prepare('SELECT count(*) AS c FROM shards').get() as { c: number }).c, info.shardCount);

  const other = await prepareDataset({ ...base, maxSeqLen: 64 });
  assert.equal(other.reused, false);
  assert.notEqual(other.info.cacheKey, info.cacheKey);
  assert.equal(other.info.tokenizerFile, info.tokenizerFile, 'the trained tokenizer is reused for the same corpus');
});

test('batches match the engine contract; each peer has its own order; worker and in-thread streams agree for the same position', async (t) => {
  const { store, base } = setup(t);
  const { info } = await prepareDataset(base);
  const a = openBatchStream({ store, cacheKey: info.cacheKey, batchSize: 4, seed: 1, peerId: 'peer-a', worker: false });
  const batches = await take(a, 3);
  await a.close();
  for (const b of batches) {
    checkBatch(b, info.vocabSize);
    assert.equal(b.seqLen, 128);
  }
  const b = openBatchStream({ store, cacheKey: info.cacheKey, batchSize: 4, seed: 1, peerId: 'peer-b', worker: false });
  const [other] = await take(b, 1);
  await b.close();
  assert.notDeepEqual(other!.inputIds, batches[0]!.inputIds);

  store.db.prepare("DELETE FROM data_cursors WHERE peer_id = 'peer-a'").run();
  const w = openBatchStream({ store, cacheKey: info.cacheKey, batchSize: 4, seed: 1, peerId: 'peer-a' });
  const fromWorker = await take(w, 3);
  await w.close();
  assert.deepEqual(fromWorker, batches);
});

test('a restart continues from the persisted cursor: no batch is repeated, the sequence is the uninterrupted one', async (t) => {
  const { store, base } = setup(t);
  const { info } = await prepareDataset(base);
  const open = () => openBatchStream({ store, cacheKey: info.cacheKey, batchSize: 8, seed: 3, peerId: 'peer-r', worker: false });
  const whole = open();
  const uninterrupted = await take(whole, 12);
  await whole.close();
  store.db.prepare('DELETE FROM data_cursors').run();

  let s = open();
  const before = await take(s, 5);
  await s.close();
  assert.equal(s.cursor.examplesRead, 40);
  s = open();
  const after = await take(s, 7);
  await s.close();
  assert.deepEqual([...before, ...after].map((b) => b.sentenceOrderLabel), uninterrupted.map((b) => b.sentenceOrderLabel));
  assert.deepEqual([...before, ...after], uninterrupted);
  assert.equal(s.cursor.examplesRead, 96);
});

test('a corrupt shard row (bad sha256, bad length) is skipped with a counted warning, not a crash', async (t) => {
  const { store, base } = setup(t);
  const { info } = await prepareDataset(base);
  const seqs = store.db.prepare('SELECT seq, data FROM shards WHERE cache_key = ? ORDER BY seq').all(info.cacheKey) as { seq: number; data: Buffer }[];
  const flipped = Buffer.from(seqs[0]!.data);
  flipped[flipped.length - 1]! ^= 0xff;
  store.db.prepare('UPDATE shards SET data = ? WHERE cache_key = ? AND seq = ?').run(flipped, info.cacheKey, seqs[0]!.seq);
  // Truncated data with a matching sha256: caught by the length checks.
  const truncated = seqs[1]!.data.subarray(0, seqs[1]!.data.length - 6);
  const { createHash } = await import('node:crypto');
  store.db.prepare('UPDATE shards SET data = ?, sha256 = ? WHERE cache_key = ? AND seq = ?').run(truncated, createHash('sha256').update(truncated).digest('hex'), info.cacheKey, seqs[1]!.seq);

  const warnings: string[] = [];
  const s = openBatchStream({ store, cacheKey: info.cacheKey, batchSize: 16, seed: 1, peerId: 'p', worker: false, onWarning: (w) => warnings.push(w) });
  const needed = Math.ceil(info.examples / 16) + 1; // more than one pass over the good shards
  const batches = await take(s, needed);
  await s.close();
  batches.forEach((b) => checkBatch(b, info.vocabSize));
  assert.ok(s.corruptShardsSkipped >= 2 && s.corruptShardsSkipped === warnings.length);
  assert.ok(warnings.some((w) => /sha256 mismatch/.test(w)));
  assert.ok(warnings.some((w) => /bytes, expected|header says/.test(w)));

  // Every shard corrupt: a clear error, not an endless loop.
  store.db.prepare("UPDATE shards SET sha256 = 'x' WHERE cache_key = ?").run(info.cacheKey);
  const dead = openBatchStream({ store, cacheKey: info.cacheKey, batchSize: 4, seed: 1, peerId: 'q', worker: false });
  await assert.rejects(dead.next(), /no readable shard/);
  await dead.close();
  // through the batch worker too: a DataError (the CLI prints its one line) naming what was wrong
  const viaWorker = openBatchStream({ store, cacheKey: info.cacheKey, batchSize: 4, seed: 1, peerId: 'q' });
  await assert.rejects(viaWorker.next(), (err: Error) => err instanceof DataError && /no readable shard \(the last: shard \d+ of \S+: sha256 mismatch/.test(err.message));
  await viaWorker.close();
});

test('the disk quota evicts whole datasets, least recently used first', async (t) => {
  const { store, base } = setup(t);
  // Distinct millisecond timestamps for last_used_at (no assertion depends on durations).
  const tick = () => new Promise((r) => setTimeout(r, 5));
  const a = await prepareDataset({ ...base, maxSeqLen: 100 });
  await tick();
  const b = await prepareDataset({ ...base, maxSeqLen: 110 });
  await tick();
  assert.equal((await prepareDataset({ ...base, maxSeqLen: 100 })).reused, true); // marks A as recently used
  await tick();
  // Room for about two of the three (similar-sized) datasets.
  const quota = 2.5 * Math.max(a.info.bytes, b.info.bytes);
  const c = await prepareDataset({ ...base, maxSeqLen: 120, cacheQuotaBytes: quota });
  assert.ok(a.info.bytes + b.info.bytes + c.info.bytes > quota && a.info.bytes + c.info.bytes <= quota, 'the three datasets have similar sizes');
  assert.deepEqual(c.evicted, [b.info.cacheKey]);
  const keys = new DatasetStore(store.db).list().map((d) => d.cacheKey);
  assert.deepEqual(new Set(keys), new Set([a.info.cacheKey, c.info.cacheKey]));
  assert.equal((store.db.prepare('SELECT count(*) AS c FROM shards WHERE cache_key = ?').get(b.info.cacheKey) as { c: number }).c, 0);
});

test('eviction to the quota leaves a build in progress alone (another process writing it holds its build lock)', async (t) => {
  const { dataDir, store, base } = setup(t);
  const done = await prepareDataset(base);
  const datasets = new DatasetStore(store.db);
  const building = { ...done.info, cacheKey: 'another-process-builds-this' };
  const lockFile = path.resolve(dataDir, 'data', 'building', `${building.cacheKey}.lock`);
  fs.mkdirSync(path.dirname(lockFile), { recursive: true });
  const lock = tryLockFile(lockFile)!;
  t.after(() => lock.release());
  datasets.begin(building);
  datasets.writeShard(building.cacheKey, 0, Array.from({ length: 20 }, () => ({ a: [5, 6, 7], b: [8, 9], sop: 0 as const })), done.info.vocabSize);
  // a quota the new dataset fits in, but not beside the finished one: that goes
  const next = await prepareDataset({ ...base, maxSeqLen: 100, cacheQuotaBytes: 1.5 * done.info.bytes });
  assert.deepEqual(next.evicted, [done.info.cacheKey]);
  const shards = (store.db.prepare('SELECT count(*) AS c FROM shards WHERE cache_key = ?').get(building.cacheKey) as { c: number }).c;
  assert.equal(shards, 1, 'the build in progress keeps its shard');
});

test('the quota holds while a dataset is built: older datasets are evicted as it grows, and a build that alone passes it stops with its shards removed', async (t) => {
  const { store, base } = setup(t);
  const datasets = new DatasetStore(store.db);
  const old = await prepareDataset(base);
  // room for the new dataset (about the old one's size), not for both: the old one goes before the build is done
  const heldWhileBuilding: boolean[] = [];
  const next = await prepareDataset({
    ...base,
    maxSeqLen: 100,
    cacheQuotaBytes: 1.5 * old.info.bytes,
    onProgress: (e) => {
      if (e.phase === 'tokenize') heldWhileBuilding.push(datasets.get(old.info.cacheKey) !== undefined);
    },
  });
  assert.deepEqual(next.evicted, [old.info.cacheKey]);
  assert.equal(heldWhileBuilding.at(-1), false, 'evicted before the build finished');
  assert.ok(datasets.totalBytes() <= 1.5 * old.info.bytes);

  // a quota below the dataset's own size: it stops and keeps none of its shards
  const other = setup(t);
  await assert.rejects(
    prepareDataset({ ...other.base, cacheQuotaBytes: next.info.bytes / 2 }),
    (err: Error) => err instanceof DataError && /passed the cache quota of .* after \d+ documents \(\d+ shards, .*\): its shards were removed; give a larger --cache-quota/.test(err.message),
  );
  assert.deepEqual(new DatasetStore(other.store.db).list(), []);
  assert.equal(new DatasetStore(other.store.db).totalBytes(), 0);
});

test('an interrupted or empty prepare leaves nothing half-written in the cache', async (t) => {
  const { dataDir, store, base } = setup(t);
  let shards = 0;
  await assert.rejects(
    prepareDataset({
      ...base,
      onProgress: (e) => {
        if (e.phase === 'tokenize' && e.examples > 30) {
          shards++;
          throw new Error('interrupted');
        }
      },
    }),
    /interrupted/,
  );
  assert.equal(shards, 1, 'interrupted after the first shard was written');
  const count = (sql: string) => (store.db.prepare(sql).get() as { c: number }).c;
  assert.equal(count('SELECT count(*) AS c FROM shards'), 0);
  assert.equal(count('SELECT count(*) AS c FROM datasets'), 0);

  const empty = path.join(dataDir, 'corpus');
  fs.mkdirSync(empty);
  fs.writeFileSync(path.join(empty, 'one.txt'), 'Only one sentence here');
  await assert.rejects(prepareDataset({ ...base, source: empty, maxDocuments: undefined }), /gave no training examples \(1 documents, 1 sentences/);
  assert.equal(count('SELECT count(*) AS c FROM datasets'), 0);
});

test('a source with no text (an empty file, a binary one) warns about each skipped input and fails with their count and reasons', async (t) => {
  const { dataDir, base } = setup(t);
  const corpus = path.join(dataDir, 'no-text');
  fs.mkdirSync(corpus);
  fs.writeFileSync(path.join(corpus, 'a.txt'), Buffer.from([0x41, 0x00, 0x42, 0x0a]));
  fs.writeFileSync(path.join(corpus, 'b.txt'), '');
  const warnings: string[] = [];
  await assert.rejects(prepareDataset({ ...base, source: corpus, maxDocuments: undefined, onWarning: (m) => warnings.push(m) }), (err: Error) => {
    assert.ok(err instanceof DataError);
    assert.match(err.message, /has no text to train a tokenizer on \(2 input\(s\) skipped: \S+a\.txt: binary data .*; \S+b\.txt: empty file\)$/);
    return true;
  });
  assert.equal(warnings.length, 2);
  assert.match(warnings[0]!, /^skipped \S+a\.txt: binary data/);
  assert.match(warnings[1]!, /^skipped \S+b\.txt: empty file$/);
});

function shardHashes(store: Store, cacheKey: string): string[] {
  return store.db.prepare('SELECT sha256 FROM shards WHERE cache_key = ? ORDER BY seq').pluck().all(cacheKey) as string[];
}

test('a prepared dataset is identified by its content: shard hashes, max length, SOP parameters, tokenizer sha256', async (t) => {
  const a = setup(t);
  const b = setup(t);
  const first = (await prepareDataset(a.base)).info;
  const tokenizerSha = createHash('sha256').update(fs.readFileSync(first.tokenizerFile)).digest('hex');
  assert.equal(first.tokenizerHash, tokenizerSha);
  assert.equal(first.datasetId, datasetIdOf({ maxSeqLen: 128, shortSeqProb: 0.1, tokenizerSha256: tokenizerSha }, shardHashes(a.store, first.cacheKey)));
  // Another peer preparing the same inputs gets the same identity (preparation is deterministic) …
  const twin = (await prepareDataset(b.base)).info;
  assert.equal(twin.datasetId, first.datasetId);
  assert.equal(new DatasetStore(b.store.db).byDatasetId(first.datasetId)?.cacheKey, twin.cacheKey);
  // … and any setting that changes the examples changes it.
  const ids = new Set<string | null>([first.datasetId]);
  for (const change of [{ maxSeqLen: 64 }, { shortSeqProb: 0.3 }, { seed: 1 }, { vocabSize: 1400 }]) ids.add((await prepareDataset({ ...b.base, ...change })).info.datasetId);
  assert.equal(ids.size, 5);
  // the same shards under another tokenizer are another dataset
  assert.notEqual(datasetIdOf({ maxSeqLen: 128, shortSeqProb: 0.1, tokenizerSha256: '0'.repeat(64) }, shardHashes(a.store, first.cacheKey)), first.datasetId);
});

test('migration 5 gives datasets prepared before it their identity; an incomplete one stays without', async (t) => {
  const { store, base } = setup(t);
  const { info } = await prepareDataset(base);
  const db = store.db;
  // Rebuild the database as schema 4 left it, with this dataset in it, and an unfinished one.
  db.exec('ALTER TABLE datasets DROP COLUMN dataset_id; ALTER TABLE datasets DROP COLUMN manifest; DROP INDEX shards_sha256');
  db.prepare("INSERT INTO datasets (cache_key, source, dataset_hash, tokenizer_hash, tokenizer_file, params, vocab_size, created_at, last_used_at) SELECT 'half', source, dataset_hash, tokenizer_hash, tokenizer_file, params, vocab_size, 0, 0 FROM datasets").run();
  db.pragma('user_version = 4');
  assert.deepEqual(migrate(db, MIGRATIONS.filter((m) => m.version <= 5)), [5]);
  const datasets = new DatasetStore(db);
  assert.equal(datasets.get(info.cacheKey)!.datasetId, info.datasetId);
  assert.equal(datasets.get('half')!.datasetId, null);
});
