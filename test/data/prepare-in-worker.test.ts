import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test, { type TestContext } from 'node:test';
import { DatasetStore } from '../../src/data/dataset-store.js';
import { DataError, TokenizerFileError } from '../../src/data/errors.js';
import { prepareDatasetInWorker } from '../../src/data/prepare-in-worker.js';
import { prepareDataset, type PrepareEvent, type PrepareOptions } from '../../src/data/prepare.js';
import { openStore, type Store } from '../../src/store/index.js';
import { tmpDir } from '../helpers/tmp.js';

const WORDS = 'the river city council voted again after long debate about bridges schools roads water power trade farmers workers rising prices new laws old courts many people small towns great nations peace war army navy letters treaty union states'.split(' ');

/** A folder of small deterministic English-like documents, plus one binary file the sources skip with a warning. */
function writeCorpus(dir: string, documents: number): string {
  const corpus = path.join(dir, 'corpus');
  fs.mkdirSync(corpus);
  let x = 12345;
  const next = (n: number) => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x % n;
  };
  for (let d = 0; d < documents; d++) {
    const paragraphs = Array.from({ length: 3 }, () =>
      Array.from({ length: 6 }, () => {
        const words = Array.from({ length: 5 + next(8) }, () => WORDS[next(WORDS.length)]!);
        return `${words.join(' ').replace(/^./, (c) => c.toUpperCase())}.`;
      }).join(' '),
    );
    fs.writeFileSync(path.join(corpus, `doc-${String(d).padStart(2, '0')}.txt`), paragraphs.join('\n\n'));
  }
  fs.writeFileSync(path.join(corpus, 'binary.txt'), Buffer.from([0, 1, 2, 0xff, 0xfe, 0, 0, 7]));
  return corpus;
}

function freshStore(t: TestContext): { dataDir: string; store: Store } {
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  t.after(() => store.close());
  return { dataDir, store };
}

const count = (store: Store, table: 'datasets' | 'shards') => (store.db.prepare(`SELECT count(*) AS c FROM ${table}`).get() as { c: number }).c;

type Logged = { progress: PrepareEvent } | { warning: string };

test('the worker builds the same dataset as prepareDataset in this thread, with the same progress and warnings', async (t) => {
  const corpus = writeCorpus(tmpDir(t), 14);
  const run = async (prepare: (o: PrepareOptions) => ReturnType<typeof prepareDataset>) => {
    const { dataDir, store } = freshStore(t);
    const log: Logged[] = [];
    const result = await prepare({ store, dataDir, source: corpus, vocabSize: 200, maxSeqLen: 32, shardExamples: 5, onProgress: (progress) => log.push({ progress }), onWarning: (warning) => log.push({ warning }) });
    const shards = store.db.prepare('SELECT seq, examples, tokens, sha256 FROM shards WHERE cache_key = ? ORDER BY seq').all(result.info.cacheKey);
    return { result, log, shards, tokenizer: fs.readFileSync(result.info.tokenizerFile), dataDir };
  };
  const here = await run(prepareDataset);
  const there = await run(prepareDatasetInWorker);

  assert.equal(there.result.reused, false);
  assert.equal(there.result.info.complete, true);
  assert.equal(there.result.info.cacheKey, here.result.info.cacheKey);
  assert.ok(here.result.info.shardCount > 2, `${here.result.info.shardCount} shards of ${here.result.info.examples} examples: the fixture should give several`);
  assert.equal(there.result.info.shardCount, here.result.info.shardCount);
  assert.equal(there.result.info.examples, here.result.info.examples);
  assert.equal(there.result.info.tokens, here.result.info.tokens);
  assert.equal(there.result.skipped, 1);
  assert.deepEqual(there.shards, here.shards);
  assert.ok(there.result.info.tokenizerFile.startsWith(there.dataDir), 'the tokenizer is trained into the worker caller\'s data directory');
  assert.ok(there.tokenizer.equals(here.tokenizer), 'the trained tokenizer.json has the same bytes');

  // Every event came back, in order: the tokenizer pass over 14 documents, the tokenize pass, the skip warning.
  assert.deepEqual(there.log, here.log);
  const phases = there.log.flatMap((l) => ('progress' in l ? [l.progress.phase] : []));
  assert.equal(phases.filter((p) => p === 'train-tokenizer').length, 14);
  assert.equal(phases.filter((p) => p === 'tokenize').length, 14);
  const warnings = there.log.flatMap((l) => ('warning' in l ? [l.warning] : []));
  assert.equal(warnings.length, 1);
  assert.ok(warnings[0]!.startsWith(`skipped ${path.join(corpus, 'binary.txt')}: `), warnings[0]);
});

test('failures in the worker reject with the same error class and message and leave no dataset behind', async (t) => {
  const { dataDir, store } = freshStore(t);
  const one = path.join(dataDir, 'one-sentence');
  fs.mkdirSync(one);
  fs.writeFileSync(path.join(one, 'one.txt'), 'Only one sentence here');
  const here = await prepareDataset({ store, dataDir, source: one }).then(
    () => assert.fail('expected a DataError'),
    (e: unknown) => e as Error,
  );
  assert.ok(here instanceof DataError);
  await assert.rejects(prepareDatasetInWorker({ store, dataDir, source: one }), (e: unknown) => {
    assert.ok(e instanceof DataError, `got ${String(e)}`);
    assert.equal(e.name, 'DataError');
    assert.equal(e.message, here.message);
    return true;
  });
  assert.equal(count(store, 'datasets'), 0);
  assert.equal(count(store, 'shards'), 0);

  // A subclass stays that subclass.
  const badTokenizer = path.join(dataDir, 'tokenizer.json');
  fs.writeFileSync(badTokenizer, '{ not json');
  await assert.rejects(prepareDatasetInWorker({ store, dataDir, source: writeCorpus(dataDir, 4), tokenizerFile: badTokenizer }), (e: unknown) => {
    assert.ok(e instanceof TokenizerFileError, `got ${String(e)}`);
    assert.match(e.message, /tokenizer .*tokenizer\.json: not JSON/);
    return true;
  });
  // A bad option is refused by prepareDataset's own checks, as in this thread.
  await assert.rejects(prepareDatasetInWorker({ store, dataDir, maxSeqLen: 3 }), (e: unknown) => e instanceof RangeError && /maxSeqLen 3: expected an integer in 8\.\.8192/.test(e.message));
  assert.equal(count(store, 'datasets'), 0);
});

test('a callback that throws aborts the preparation in the worker: the promise rejects with that error and the partial shards are removed', async (t) => {
  const { dataDir, store } = freshStore(t);
  const stop = new Error('stop here');
  const options = { store, dataDir, source: 'bundled', maxDocuments: 120, vocabSize: 1500, shardExamples: 25 };
  let calls = 0;
  await assert.rejects(
    prepareDatasetInWorker({
      ...options,
      // thrown at the first tokenized address, with 119 (seconds of work) left for the abort to reach the worker
      onProgress: (e) => {
        if (e.phase !== 'tokenize') return;
        calls++;
        throw stop;
      },
    }),
    (e: unknown) => e === stop,
  );
  assert.equal(calls, 1, 'no callback runs after the one that threw');
  assert.equal(count(store, 'datasets'), 0);
  assert.equal(count(store, 'shards'), 0);
  // The store is usable again at once: the same preparation now completes (reusing the trained tokenizer).
  const { info } = await prepareDatasetInWorker(options);
  assert.deepEqual(new DatasetStore(store.db).list().map((d) => d.cacheKey), [info.cacheKey]);
});

test('this thread keeps serving timers while the worker prepares a corpus that takes seconds', async (t) => {
  const { dataDir, store } = freshStore(t);
  let ticks = 0;
  let maxGap = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    maxGap = Math.max(maxGap, now - last);
    last = now;
    ticks++;
  }, 10);
  const started = performance.now();
  try {
    // 80 addresses of the bundled corpus: about 3 s of tokenizer training and tokenizing on one core;
    // in this thread the tokenizer training alone blocks timers for about 2 s.
    await prepareDatasetInWorker({ store, dataDir, source: 'bundled', maxDocuments: 80 });
  } finally {
    clearInterval(timer);
  }
  const elapsed = performance.now() - started;
  maxGap = Math.max(maxGap, performance.now() - last);
  assert.ok(elapsed >= 1000, `the preparation took ${elapsed.toFixed(0)} ms; the check needs one that takes at least 1 s`);
  assert.ok(ticks >= 20, `${ticks} ticks of a 10 ms timer in ${elapsed.toFixed(0)} ms`);
  assert.ok(maxGap < 500, `the timer was held up for ${maxGap.toFixed(0)} ms`);
});
