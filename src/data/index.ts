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
export { prepareDataset, DEFAULT_MAX_SEQ_LEN, DEFAULT_VOCAB_SIZE, type PrepareOptions, type PrepareEvent, type PreparedDataset } from './prepare.js';
export { prepareDatasetInWorker } from './prepare-in-worker.js';
export { openBatchStream, findDataset, vocabInfoOf, type BatchStream, type BatchStreamOptions } from './stream.js';
export { BatchProducer, type ProducerInit, type ProducedBatch } from './batch-producer.js';
export { DatasetStore, type DatasetInfo, type ReadCursor, type BuildParams } from './dataset-store.js';
export { datasetStore } from './store-datasets.js';
export { datasetTokenizer, loadTokenizer, type TextTokenizer } from './tokenizer.js';
export { DataError, TokenizerFileError, DownloadError } from './errors.js';
export { MASKING_MODES, type MaskingMode, type MaskingOptions } from './masking.js';
export { SOURCE_FORMATS, BUNDLED_SOURCE, type SourceFormat } from './sources.js';
export { download, type DownloadProgress } from './download.js';
