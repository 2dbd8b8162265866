import { prepareDataset } from '../../src/data/prepare.js';
import { openStore } from '../../src/store/index.js';

/**
 * Prepares a small bundled-corpus dataset of many shards (6 examples each, sequences of 64) in the
 * store of `dataDir`, for tests of a coordinator that serves it: a quota of a fraction holds a few
 * shards, and a fetch takes long enough to be watched.
 */
export async function prepareManyShards(dataDir: string, seed = 0): Promise<Awaited<ReturnType<typeof prepareDataset>>['info']> {
  const store = openStore(dataDir);
  try {
    // another seed: the same tokenizer and vocabulary (one model shape), other examples, so another dataset id
    return (await prepareDataset({ store, dataDir, source: 'bundled', maxDocuments: 4, vocabSize: 1500, maxSeqLen: 64, shardExamples: 6, seed })).info;
  } finally {
    store.close();
  }
}
