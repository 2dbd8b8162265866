import type { AlbertBatch } from '../engine/batch.js';
import type { Store } from '../store/index.js';
import { BatchProducer, type ProducedBatch } from './batch-producer.js';
import { type DatasetInfo, type ReadCursor } from './dataset-store.js';
import { datasetStore } from './store-datasets.js';
import { DataError } from './errors.js';
import type { MaskingOptions, VocabInfo } from './masking.js';
import { datasetTokenizer } from './tokenizer.js';
import type { ToWorker, WorkerInit } from './stream-worker.js';
import { siblingEntry, startWorker } from '../util/worker-thread.js';

export interface BatchStreamOptions {
  readonly store: Store;
  /** The dataset to read; the most recently used complete one when absent. */
  readonly cacheKey?: string;
  readonly batchSize: number;
  /** Row length; defaults to the dataset's max_seq_length. Longer examples are cut. */
  readonly seqLen?: number;
  readonly seed: number;
  /** Seeds this peer's own shard order; the read cursor is kept per (dataset, peer, seed). */
  readonly peerId: string;
  readonly masking?: MaskingOptions;
  /** Batches built ahead. @default 4 */
  readonly prefetch?: number;
  /** Build batches in a worker thread (default) or in this thread (tests, tools). */
  readonly worker?: boolean;
  /** Told about each corrupt shard skipped. */
  readonly onWarning?: (message: string) => void;
  /** Told which shards (seq) were trained on through this pass: their last batch was handed out and released by the next call. */
  readonly onShardsTrained?: (seqs: readonly number[]) => void;
}

/** Batches for the trainer; each `next()` also records that the previous batch was consumed. */
export interface BatchStream extends AsyncIterableIterator<AlbertBatch> {
  readonly dataset: DatasetInfo;
  readonly vocabSize: number;
  readonly seqLen: number;
  /** The persisted position (after the last batch handed out and then released by a next call). */
  readonly cursor: ReadCursor;
  readonly corruptShardsSkipped: number;
  close(): Promise<void>;
}

/** The dataset a trainer reads by default: the most recently used complete one. */
export function findDataset(store: Store, cacheKey?: string): DatasetInfo {
  const datasets = datasetStore(store);
  const info = cacheKey ? datasets.get(cacheKey) : datasets.list()[0];
  if (!info || !info.complete) throw new DataError(cacheKey ? `no prepared dataset ${cacheKey} in ${store.file}; run \`cohort data prepare\`` : `no prepared dataset in ${store.file}; run \`cohort data prepare\` first`);
  return info;
}

/** The vocabulary facts masking needs, from the dataset's tokenizer.json. */
function vocabInfoOf(info: DatasetInfo): VocabInfo {
  const t = datasetTokenizer(info);
  return { vocabSize: t.vocabSize, special: t.special, isSpecial: t.isSpecial, wordStart: t.wordStart };
}

/**
 * Opens a stream of masked ALBERT batches over a prepared dataset. Batches are produced ahead in a
 * worker thread, so the training loop never waits on data; the peer's read cursor is persisted in
 * the store, so a restart does not repeat what this peer already trained on.
 */
export function openBatchStream(options: BatchStreamOptions): BatchStream {
  const dataset = findDataset(options.store, options.cacheKey);
  const datasets = datasetStore(options.store);
  datasets.touch(dataset.cacheKey);
  if (!Number.isInteger(options.batchSize) || options.batchSize < 1) throw new RangeError(`batchSize ${options.batchSize}: expected a positive integer`);
  const seqLen = options.seqLen ?? dataset.params.maxSeqLen;
  const vocab = vocabInfoOf(dataset);
  const init = {
    cacheKey: dataset.cacheKey,
    batchSize: options.batchSize,
    seqLen,
    seed: options.seed,
    peerId: options.peerId,
    vocab,
    masking: options.masking ?? {},
    start: datasets.getCursor(dataset.cacheKey, options.peerId, options.seed),
  };
  const source = options.worker === false ? inThreadSource(new BatchProducer(datasets, init)) : workerSource({ ...init, dbFile: options.store.file }, options.prefetch ?? 4);

  let cursor: ReadCursor = init.start ?? { epoch: 0, shardPos: 0, examplePos: 0, examplesRead: 0 };
  let handedOut: ProducedBatch | undefined;
  let corrupt = 0;
  let closed = false;
  const commit = () => {
    if (handedOut === undefined) return;
    const { finished } = handedOut;
    cursor = handedOut.cursor;
    handedOut = undefined;
    datasets.setCursor(dataset.cacheKey, options.peerId, options.seed, cursor);
    if (finished.length > 0) options.onShardsTrained?.(finished);
  };
  const stream: BatchStream = {
    dataset,
    vocabSize: vocab.vocabSize,
    seqLen,
    get cursor() {
      return cursor;
    },
    get corruptShardsSkipped() {
      return corrupt;
    },
    async next(): Promise<IteratorResult<AlbertBatch>> {
      commit();
      if (closed) return { done: true, value: undefined };
      const p = await source.next();
      for (const w of p.warnings) {
        corrupt++;
        options.onWarning?.(`skipped corrupt shard: ${w}`);
      }
      handedOut = p;
      return { done: false, value: p.batch };
    },
    async return(): Promise<IteratorResult<AlbertBatch>> {
      await stream.close();
      return { done: true, value: undefined };
    },
    async close() {
      if (closed) return;
      commit();
      closed = true;
      await source.close();
    },
    [Symbol.asyncIterator]() {
      return stream;
    },
  };
  return stream;
}

interface Source {
  next(): Promise<ProducedBatch>;
  close(): Promise<void>;
}

function inThreadSource(producer: BatchProducer): Source {
  return { next: async () => producer.next(), close: async () => {} };
}

type FromWorker = { type: 'batch'; produced: ProducedBatch } | { type: 'error'; message: string; data: boolean };

function workerSource(init: WorkerInit, prefetch: number): Source {
  const worker = startWorker(siblingEntry(import.meta.url, 'stream-worker'), { workerData: init });
  const ready: FromWorker[] = [];
  let waiting: { resolve: (m: FromWorker) => void; reject: (e: Error) => void } | undefined;
  let failure: Error | undefined;
  const deliver = (m: FromWorker) => {
    const w = waiting;
    waiting = undefined;
    if (w) w.resolve(m);
    else ready.push(m);
  };
  const fail = (e: Error) => {
    failure ??= e;
    const w = waiting;
    waiting = undefined;
    w?.reject(e);
  };
  // The worker keeps the process alive only while a batch is awaited, so a trainer that ends
  // without close() does not hang on the prefetching thread.
  worker.unref();
  worker.on('message', deliver);
  worker.on('error', (e) => fail(new Error(`batch worker failed: ${e.message}`)));
  worker.on('exit', (code) => fail(new Error(`batch worker exited (code ${code})`)));
  worker.postMessage({ type: 'credit', n: prefetch } satisfies ToWorker);
  return {
    async next() {
      let msg = ready.shift();
      if (msg === undefined) {
        if (failure) throw failure;
        worker.ref();
        try {
          msg = await new Promise<FromWorker>((resolve, reject) => (waiting = { resolve, reject }));
        } finally {
          worker.unref();
        }
      }
      if (msg.type === 'error') throw msg.data ? new DataError(msg.message) : new Error(msg.message);
      worker.postMessage({ type: 'credit', n: 1 } satisfies ToWorker);
      return msg.produced;
    },
    async close() {
      worker.removeAllListeners('exit');
      worker.ref(); // keep the process alive until the worker has exited
      worker.postMessage({ type: 'stop' } satisfies ToWorker);
      // The worker closes its database and port and exits; terminate is the bounded fallback.
      await Promise.race([new Promise((r) => worker.once('exit', r)), new Promise((r) => setTimeout(r, 2000).unref())]);
      await worker.terminate();
    },
  };
}
