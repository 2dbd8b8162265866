import type { AlbertBatch } from '../engine/batch.js';
import { Rng } from '../engine/rng.js';
import { syntheticBatch } from '../engine/synthetic.js';
import type { AlbertConfig } from '../engine/albert/config.js';
import { DatasetStore, openBatchStream } from '../data/index.js';
import type { Store } from '../store/index.js';

export const DATA_CHOICES = ['auto', 'prepared', 'synthetic'] as const;
export type DataChoice = (typeof DATA_CHOICES)[number];

/** Where a single-node training run gets its batches: a prepared dataset or, only when asked or when none exists, random tokens. */
export interface TrainingData {
  readonly kind: 'prepared' | 'synthetic';
  /** Vocabulary the model must have (the tokenizer's for prepared data). */
  readonly vocabSize: number;
  readonly description: string;
  next(): Promise<AlbertBatch>;
  close(): Promise<void>;
}

export interface OpenTrainingData {
  readonly choice: DataChoice;
  readonly store: Store;
  readonly config: AlbertConfig;
  readonly batchSize: number;
  readonly seqLen: number;
  readonly seed: number;
  readonly onWarning: (message: string) => void;
}

export function openTrainingData(o: OpenTrainingData): TrainingData {
  const hasDataset = new DatasetStore(o.store.db).list().some((d) => d.complete);
  if (o.choice === 'prepared' || (o.choice === 'auto' && hasDataset)) {
    const stream = openBatchStream({ store: o.store, batchSize: o.batchSize, seqLen: o.seqLen, seed: o.seed, peerId: 'local', onWarning: o.onWarning });
    return {
      kind: 'prepared',
      vocabSize: stream.vocabSize,
      description: `prepared dataset ${stream.dataset.cacheKey} (${stream.dataset.source})`,
      next: async () => (await stream.next()).value as AlbertBatch,
      close: () => stream.close(),
    };
  }
  const rng = new Rng(o.seed + 1);
  return {
    kind: 'synthetic',
    vocabSize: o.config.vocabSize,
    description: 'SYNTHETIC random tokens (no prepared dataset; run `cohort data prepare`): losses do not measure language modelling',
    next: async () => syntheticBatch(o.config, o.batchSize, o.seqLen, rng),
    close: async () => {},
  };
}
