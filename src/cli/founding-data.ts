/**
 * The data a founder pins in its run record: a source it names with `--data-source` (prepared here,
 * with progress, for the run's sequence length), else the dataset it holds (a training founder
 * prepares the bundled corpus on its first start), else none.
 */
import type { RunData } from '../collab/index.js';
import { prepareDatasetInWorker } from '../data/index.js';
import type { Logger } from '../log/logger.js';
import type { Store } from '../store/index.js';
import { ensureDataset } from '../training/data.js';
import { ownRunData, pinsOf } from '../training/run-data.js';
import { preparationProgress } from './commands/data.js';

export interface FoundingDataOptions {
  readonly store: Store;
  readonly dataDir: string;
  readonly log: Logger;
  /** A coordinator trains nothing, so it prepares nothing unless given a source. */
  readonly coordinator: boolean;
  /** `--data-source`: FILE, DIR or URL as `cohort data prepare --source` takes. */
  readonly source?: string | undefined;
  /** `--tokenizer`: a Hugging Face tokenizer.json; default: a WordPiece tokenizer trained on the source. */
  readonly tokenizer?: string | undefined;
  /** `--disk-reserve` in bytes: what a URL source's download leaves free; default: the download's. */
  readonly reserveBytes?: number | undefined;
  /** The run's sequence length: examples are built for it. */
  readonly seqLen: number;
  /** A stop (SIGINT/SIGTERM) ends the preparation at its next progress step, its partial shards removed. */
  readonly signal: AbortSignal;
}

export async function foundingData(o: FoundingDataOptions): Promise<RunData | null> {
  if (o.source !== undefined) {
    o.log.info(`preparing the run's data from ${o.source}`);
    const progress = preparationProgress();
    try {
      const result = await prepareDatasetInWorker({ store: o.store, dataDir: o.dataDir, source: o.source, maxSeqLen: o.seqLen, reserveBytes: o.reserveBytes, ...(o.tokenizer !== undefined ? { tokenizerFile: o.tokenizer } : {}), onProgress: (e) => (o.signal.throwIfAborted(), progress.update(e)), onWarning: (m) => o.log.warn(m) });
      progress.done();
      const d = result.info;
      o.log.info(`${result.reused ? 'reused' : 'prepared'} dataset ${d.datasetId}: ${d.examples} examples, ${d.tokens} tokens in ${d.shardCount} shards; tokenizer sha256 ${d.tokenizerHash}`);
      return pinsOf(d);
    } finally {
      progress.done();
    }
  }
  if (!o.coordinator) await ensureDataset(o.store, o.dataDir, o.log);
  return ownRunData(o.store);
}
