import type { AlbertBatch } from '../../src/engine/batch.js';

/**
 * Two sequences of 5 with what the engine must get right at the edges: a padded tail (attention
 * mask 0), both token types, ignored labels (−100), a repeated label id and both SOP labels.
 */
export const PADDED_TINY_BATCH: AlbertBatch = {
  batchSize: 2,
  seqLen: 5,
  inputIds: Int32Array.from([2, 7, 9, 7, 3, 2, 11, 5, 0, 0]),
  tokenTypeIds: Int32Array.from([0, 0, 1, 1, 1, 0, 0, 1, 0, 0]),
  attentionMask: Int32Array.from([1, 1, 1, 1, 1, 1, 1, 1, 0, 0]),
  labels: Int32Array.from([-100, 13, -100, 13, -100, -100, 21, -100, -100, -100]),
  sentenceOrderLabel: Int32Array.from([1, 0]),
};
