/**
 * The data pipeline: corpus → tokenizer → ALBERT (MLM + SOP) batches, cached as shards in the store.
 *
 * @example
 * const store = openStore(dataDir);
 * const { info } = await prepareDataset({ store, dataDir });            // bundled corpus, trained tokenizer
 * // (prepareDatasetInWorker: the same, off this thread's event loop, for a process that also serves peers)
 * const stream = openBatchStream({ store, cacheKey: info.cacheKey, batchSize: 8, seed: 1, peerId });
 * for await (const batch of stream) engine.step(batch);                // AlbertBatch, vocab = stream.vocabSize
 */
export { prepareDataset, type PrepareOptions, type PrepareEvent, type PreparedDataset } from './prepare.js';
export { prepareDatasetInWorker } from './prepare-in-worker.js';
export { openBatchStream, findDataset, type BatchStream, type BatchStreamOptions } from './stream.js';
export { BatchProducer, type ProducerInit, type ProducedBatch } from './batch-producer.js';
export type { DatasetInfo, ReadCursor, BuildParams } from './dataset-store.js';
export { datasetStore } from './store-datasets.js';
export { datasetTokenizer, loadTokenizer, type TextTokenizer } from './tokenizer.js';
export { DataError } from './errors.js';
export type { MaskingMode, MaskingOptions } from './masking.js';
export type { SourceFormat } from './sources.js';
export type { DownloadProgress } from './download.js';
