/**
 * Where a training session gets its batches: the prepared dataset in the store (prepared from the
 * bundled corpus on a node's first start) or, only when asked or when none exists, random tokens.
 */
import { datasetStore, findDataset, openBatchStream, prepareDatasetInWorker, type PrepareOptions } from '../data/index.js';
import { Rng, syntheticBatch, type AlbertBatch, type AlbertConfig } from '../engine/index.js';
import type { Logger } from '../log/logger.js';
import type { Store } from '../store/index.js';
import type { DataChoice } from './options.js';

export interface TrainingData {
  readonly kind: 'prepared' | 'synthetic';
  readonly description: string;
  next(): Promise<AlbertBatch>;
  close(): Promise<void>;
  /** Prepared data: calls `listener` with the shards (seq) trained on through, as they are; returns the unsubscribe. */
  onShardsTrained?(listener: (seqs: readonly number[]) => void): () => void;
}

/** A vocabulary asked for that is not the prepared dataset's tokenizer's. */
export class VocabularyMismatchError extends Error {
  override readonly name = 'VocabularyMismatchError';
  constructor(
    readonly asked: number,
    readonly prepared: number,
  ) {
    super(`vocabulary ${asked} differs from the prepared dataset's tokenizer (${prepared})`);
  }
}

/** Prepares the bundled corpus (or `options`' source) in a worker when the store has no complete dataset: a node's first start. */
export async function ensureDataset(store: Store, dataDir: string, log: Logger, options: Partial<Omit<PrepareOptions, 'store' | 'dataDir'>> = {}): Promise<void> {
  if (hasDataset(store)) return;
  log.info('preparing the bundled corpus for training (first start only)');
  await prepareDatasetInWorker({ ...options, store, dataDir, onWarning: (m) => log.warn(m) });
}

/** Whether the store holds a complete dataset (DatasetStore.list lists only those). */
function hasDataset(store: Store): boolean {
  return datasetStore(store).list().length > 0;
}

/** `auto`: the prepared dataset when there is one, else synthetic tokens. */
export function dataSource(store: Store, choice: DataChoice): TrainingData['kind'] {
  return choice === 'prepared' || (choice === 'auto' && hasDataset(store)) ? 'prepared' : 'synthetic';
}

/** The prepared dataset's vocabulary (`cacheKey`'s, else the newest's); a different one asked for is a VocabularyMismatchError. */
export function preparedVocabSize(store: Store, asked: number | undefined, cacheKey?: string): number {
  const { vocabSize } = findDataset(store, cacheKey);
  if (asked !== undefined && asked !== vocabSize) throw new VocabularyMismatchError(asked, vocabSize);
  return vocabSize;
}

export interface OpenTrainingData {
  readonly source: TrainingData['kind'];
  readonly store: Store;
  /** The model's config (synthetic tokens are drawn from its vocabulary). */
  readonly config: AlbertConfig;
  readonly batchSize: number;
  readonly seqLen: number;
  readonly seed: number;
  /** The prepared dataset to read. @default the most recently used */
  readonly cacheKey?: string | undefined;
  /** Each peer reads the shared data in its own order. */
  readonly peerId: string;
  readonly onWarning: (message: string) => void;
}

export function openTrainingData(o: OpenTrainingData): TrainingData {
  if (o.source === 'prepared') {
    const listeners = new Set<(seqs: readonly number[]) => void>();
    const stream = openBatchStream({ store: o.store, ...(o.cacheKey !== undefined ? { cacheKey: o.cacheKey } : {}), batchSize: o.batchSize, seqLen: o.seqLen, seed: o.seed, peerId: o.peerId, onWarning: o.onWarning, onShardsTrained: (seqs) => listeners.forEach((l) => l(seqs)) });
    return {
      kind: 'prepared',
      description: `prepared dataset ${stream.dataset.cacheKey} (${stream.dataset.source})`,
      next: async () => (await stream.next()).value as AlbertBatch,
      close: () => stream.close(),
      onShardsTrained(listener) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    };
  }
  const rng = new Rng(o.seed + 1);
  return {
    kind: 'synthetic',
    description: 'SYNTHETIC random tokens (no prepared dataset; run `cohort data prepare`): losses do not measure language modelling',
    next: async () => syntheticBatch(o.config, o.batchSize, o.seqLen, rng),
    close: async () => {},
  };
}
