import type { AlbertConfig } from './albert/config.js';
import type { AlbertBatch } from './batch.js';
import { IGNORE_INDEX } from './batch.js';
import { Rng } from './rng.js';

/**
 * SYNTHETIC pretraining batches — random token "sentences", not text. A stand-in for the data
 * pipeline so `cohort train` and benchmarks can run end to end; its losses say nothing about
 * language modelling. Layout as HF's ALBERT: [CLS] A [SEP] B [SEP], 15% of tokens masked
 * (labels elsewhere −100), segments swapped for half the rows (sentence_order_label 1).
 */
const SYNTHETIC_SPECIAL = { pad: 0, cls: 2, sep: 3, mask: 4, firstWord: 5 } as const;

export function syntheticBatch(config: Pick<AlbertConfig, 'vocabSize'>, batchSize: number, seqLen: number, rng: Rng): AlbertBatch {
  const { cls, sep, mask, firstWord } = SYNTHETIC_SPECIAL;
  if (seqLen < 5) throw new Error(`synthetic data: seq_len must be at least 5, got ${seqLen}`);
  if (config.vocabSize <= firstWord) throw new Error(`synthetic data: vocab_size must exceed ${firstWord}, got ${config.vocabSize}`);
  const n = batchSize * seqLen;
  const inputIds = new Int32Array(n);
  const tokenTypeIds = new Int32Array(n);
  const attentionMask = new Int32Array(n).fill(1);
  const labels = new Int32Array(n).fill(IGNORE_INDEX);
  const sentenceOrderLabel = new Int32Array(batchSize);
  for (let b = 0; b < batchSize; b++) {
    const row = b * seqLen;
    const lenA = 1 + rng.int(seqLen - 4); // [CLS] A [SEP] B [SEP]: A and B each at least one token
    const sepAt = 1 + lenA;
    inputIds[row] = cls;
    for (let s = 1; s < seqLen - 1; s++) {
      inputIds[row + s] = s === sepAt ? sep : firstWord + rng.int(config.vocabSize - firstWord);
      tokenTypeIds[row + s] = s > sepAt ? 1 : 0;
    }
    inputIds[row + seqLen - 1] = sep;
    tokenTypeIds[row + seqLen - 1] = 1;
    sentenceOrderLabel[b] = rng.int(2);
    for (let s = 1; s < seqLen - 1; s++) {
      if (s === sepAt || rng.uniform() >= 0.15) continue;
      labels[row + s] = inputIds[row + s]!;
      inputIds[row + s] = mask;
    }
  }
  return { batchSize, seqLen, inputIds, tokenTypeIds, attentionMask, labels, sentenceOrderLabel };
}
