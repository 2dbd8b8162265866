import { IGNORE_INDEX } from '../batch.js';

/** The masking rate of the data pipeline (src/data/masking.ts) and of synthetic batches. */
const DEFAULT_MLM_PROBABILITY = 0.15;

/**
 * K, the number of MLM predictions a [B, S] training graph has room for (its head runs on K rows
 * instead of B·S). Token masking selects each token independently with probability p, so a batch's
 * count is Binomial(≤ B·S, p): K sits 6 standard deviations above the mean (P(count > K) < 1e-9),
 * plus one per row for word-level masking, whose per-row budget max(1, round(p · tokens)) can round
 * up. Never more than B·S. (ALBERT's own bound, max_predictions_per_seq = 20 at S = 128, is per row
 * and would be exceeded by one batch in five under token masking.)
 */
export function mlmCapacity(batchSize: number, seqLen: number, mlmProbability = DEFAULT_MLM_PROBABILITY): number {
  if (!(mlmProbability >= 0 && mlmProbability <= 1)) throw new RangeError(`mlm probability ${mlmProbability}: must be in [0, 1]`);
  const n = batchSize * seqLen;
  const bound = Math.ceil(n * mlmProbability + 6 * Math.sqrt(n * mlmProbability * (1 - mlmProbability))) + batchSize;
  return Math.min(n, bound);
}

/** The labelled positions of a batch, as the graph's `mlm_positions` / `mlm_labels` inputs. */
export interface MlmPositions {
  /** [K] indices into the flattened B·S positions, ascending; padding repeats position 0. */
  readonly positions: BigInt64Array;
  /** [K] the labels at those positions; IGNORE_INDEX for padding, so it adds nothing to loss, accuracy or gradients. */
  readonly labels: Int32Array;
}

/**
 * Collects the positions whose label ≠ −100 into `capacity` slots, or returns the count when they do
 * not fit (the caller must then use the full-positions graph: no labelled position may be dropped).
 */
export function labelledPositions(labels: Int32Array, capacity: number): MlmPositions | { readonly overflow: number } {
  const positions = new BigInt64Array(capacity);
  const picked = new Int32Array(capacity).fill(IGNORE_INDEX);
  let count = 0;
  for (let i = 0; i < labels.length; i++) {
    if (labels[i] === IGNORE_INDEX) continue;
    if (count < capacity) {
      positions[count] = BigInt(i);
      picked[count] = labels[i]!;
    }
    count++;
  }
  return count > capacity ? { overflow: count } : { positions, labels: picked };
}
