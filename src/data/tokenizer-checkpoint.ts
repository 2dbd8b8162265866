/**
 * The run's tokenizer.json kept in the store beside model checkpoints, so a checkpoint can be
 * exported as a directory Hugging Face loads (model and tokenizer) even after the prepared data is
 * gone. Stored once per content: the checkpoint's sha256 is the tokenizer's (what `cohort data stats`
 * shows and peers compare).
 */
import fs from 'node:fs';
import { createHash } from 'node:crypto';
import type { Store } from '../store/index.js';
import { datasetStore } from './store-datasets.js';

/** File name Hugging Face's AutoTokenizer reads a fast tokenizer from. */
export const TOKENIZER_FILE = 'tokenizer.json';

/** Checkpoint kind of a tokenizer.json (its bytes; meta: vocabSize). */
export const TOKENIZER_CHECKPOINT = 'tokenizer';

/**
 * Keeps the tokenizer of this store's prepared data with `vocabSize` tokens as a checkpoint (once;
 * the newest-used dataset's when several match) and returns its sha256; undefined when no prepared
 * dataset has that vocabulary.
 */
export function keepTokenizer(store: Store, vocabSize: number): string | undefined {
  const dataset = datasetStore(store)
    .list()
    .find((d) => d.vocabSize === vocabSize && fs.existsSync(d.tokenizerFile));
  if (dataset === undefined) return undefined;
  if (!store.checkpoints.list(TOKENIZER_CHECKPOINT).some((c) => c.sha256 === dataset.tokenizerHash)) {
    const bytes = fs.readFileSync(dataset.tokenizerFile);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    // the file changed since the data was prepared: it is not the tokenizer the data was made with
    if (sha256 !== dataset.tokenizerHash) throw new Error(`tokenizer ${dataset.tokenizerFile} has sha256 ${sha256}, but the prepared data was tokenized with ${dataset.tokenizerHash}`);
    store.checkpoints.save({ kind: TOKENIZER_CHECKPOINT, epoch: 0, meta: { vocabSize, source: dataset.tokenizerFile }, data: bytes });
  }
  return dataset.tokenizerHash;
}

/** The bytes of the kept tokenizer whose sha256 is `sha256` (verified by the store), or undefined. */
export function keptTokenizer(store: Store, sha256: string): Buffer | undefined {
  const info = store.checkpoints.list(TOKENIZER_CHECKPOINT).find((c) => c.sha256 === sha256);
  return info === undefined ? undefined : store.checkpoints.load(info.id).data;
}
