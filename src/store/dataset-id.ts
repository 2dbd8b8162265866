// In store/ because migration 5 computes the ids of datasets prepared before them; data/ builds on it.
import { createHash } from 'node:crypto';

/** Bumped when the shard layout or the identity's inputs change: peers on different versions then never match. */
const DATASET_ID_VERSION = 'cohort-dataset-v1';

/**
 * What peers must share besides the shards' bytes for their examples to mean the same thing. Masking
 * is not here: it is drawn per batch (dynamic), from the run's recipe, not stored in the shards.
 */
export interface DatasetSettings {
  /** Examples are built for this length ([CLS] A [SEP] B [SEP] ≤ maxSeqLen). */
  readonly maxSeqLen: number;
  /** SOP: probability of a short target length (as ALBERT's create_pretraining_data). */
  readonly shortSeqProb: number;
  /** sha256 of the tokenizer.json bytes the token ids come from. */
  readonly tokenizerSha256: string;
}

/**
 * A prepared dataset's content identity: sha256 over the version, the settings and the sha256 of
 * each shard's bytes in shard order. Two peers with the same id hold the same examples with the same
 * token ids, however they got them (prepared themselves or fetched from the swarm).
 */
export function datasetIdOf(settings: DatasetSettings, shardSha256s: readonly string[]): string {
  const { maxSeqLen, shortSeqProb, tokenizerSha256 } = settings;
  return createHash('sha256')
    .update(`${DATASET_ID_VERSION}\0${JSON.stringify({ maxSeqLen, shortSeqProb, tokenizerSha256 })}\0${shardSha256s.join('\n')}`)
    .digest('hex');
}
