import fs from 'node:fs';
import path from 'node:path';
import type { Store } from '../store/index.js';
import { tryLockFile } from '../store/data-dir-lock.js';
import { pick } from '../util/pick.js';
import { cacheKeyOf, type BuildParams, type DatasetInfo, type DatasetStore } from './dataset-store.js';
import { datasetStore } from './store-datasets.js';
import type { DownloadProgress } from './download.js';
import { DataError } from './errors.js';
import { createExamples, type SopExample } from './examples.js';
import { Prng } from './prng.js';
import { splitSentences } from './sentences.js';
import { openSource, type SkippedInput, type SourceFormat } from './sources.js';
import { keepGivenTokenizer, loadTokenizer, writeTokenizerFile, type TextTokenizer } from './tokenizer.js';
import { WordCounter, trainWordPiece } from './train-wordpiece.js';

const DEFAULT_MAX_SEQ_LEN = 128;
const DEFAULT_VOCAB_SIZE = 8000;
const DEFAULT_SHORT_SEQ_PROB = 0.1;
const DEFAULT_SHARD_EXAMPLES = 2048;
/** Default disk quota for all prepared shards together. */
const DEFAULT_CACHE_QUOTA_BYTES = 2 * 1024 ** 3;

export type PrepareEvent =
  | { readonly phase: 'download'; readonly progress: DownloadProgress }
  | { readonly phase: 'train-tokenizer'; readonly documents: number }
  | { readonly phase: 'tokenize'; readonly documents: number; readonly examples: number; readonly tokens: number };

export interface PrepareOptions {
  readonly store: Store;
  readonly dataDir: string;
  /** `bundled`, a file, a folder or an http(s) URL. @default bundled */
  readonly source?: string;
  readonly format?: SourceFormat;
  readonly field?: string;
  readonly sha256?: string;
  readonly maxDocuments?: number;
  /** A URL source's download leaves this many bytes of its disk free (`--disk-reserve`). @default DEFAULT_RESERVE_BYTES */
  readonly reserveBytes?: number;
  /** A Hugging Face tokenizer.json (kept in the data directory); without it a WordPiece tokenizer is trained on the corpus and saved next to the data. */
  readonly tokenizerFile?: string;
  readonly vocabSize?: number;
  readonly maxSeqLen?: number;
  readonly shortSeqProb?: number;
  readonly seed?: number;
  readonly shardExamples?: number;
  /** Shards of all prepared datasets together: a build evicts the others (least recently used first) as it grows past it, and stops, its shards removed, if it alone passes it. @default DEFAULT_CACHE_QUOTA_BYTES */
  readonly cacheQuotaBytes?: number;
  readonly onProgress?: (e: PrepareEvent) => void;
  readonly onWarning?: (message: string) => void;
}

export interface PreparedDataset {
  readonly info: DatasetInfo;
  /** True when complete shards for the same key were already in the store. */
  readonly reused: boolean;
  /** Input files or lines skipped (binary, non-UTF-8, empty, bad JSON). */
  readonly skipped: number;
  readonly evicted: readonly string[];
}

/**
 * Turns a corpus into SOP examples stored as shards in the store, keyed by (dataset hash, tokenizer,
 * build params); a second call with the same inputs reuses the shards. Each shard is written in its
 * own transaction and the dataset only counts once marked complete, so an interrupted prepare leaves
 * nothing that a reader would take.
 */
export async function prepareDataset(options: PrepareOptions): Promise<PreparedDataset> {
  const { store, dataDir } = options;
  const datasets = datasetStore(store);
  const maxSeqLen = options.maxSeqLen ?? DEFAULT_MAX_SEQ_LEN;
  const quota = options.cacheQuotaBytes ?? DEFAULT_CACHE_QUOTA_BYTES;
  const vocabSize = options.vocabSize ?? DEFAULT_VOCAB_SIZE;
  if (!Number.isInteger(maxSeqLen) || maxSeqLen < 8 || maxSeqLen > 8192) throw new RangeError(`maxSeqLen ${maxSeqLen}: expected an integer in 8..8192`);
  const onProgress = options.onProgress ?? (() => {});
  const warn = options.onWarning ?? (() => {});
  const source = await openSource(options.source ?? 'bundled', {
    downloadDir: path.join(dataDir, 'downloads'),
    ...pick(options, ['format', 'field', 'sha256', 'maxDocuments', 'reserveBytes']),
    onDownloadProgress: (progress) => onProgress({ phase: 'download', progress }),
  });
  const params: BuildParams = {
    maxSeqLen,
    shortSeqProb: options.shortSeqProb ?? DEFAULT_SHORT_SEQ_PROB,
    seed: options.seed ?? 0,
    format: options.format ?? 'auto',
    field: options.field ?? 'text',
    maxDocuments: options.maxDocuments ?? null,
  };
  let skipped = 0;
  const onSkip = (s: SkippedInput) => {
    skipped++;
    warn(`skipped ${s.file}: ${s.reason}`);
  };

  // A given tokenizer is identified by its bytes; a trained one by how it is trained (it is deterministic).
  // absolute: the dataset row keeps it, and a node or command started from another folder reads it
  const trainedFile = path.resolve(dataDir, 'data', `${source.hash.slice(0, 16)}-wordpiece-${vocabSize}`, 'tokenizer.json');
  const given = options.tokenizerFile ? keepGivenTokenizer(options.tokenizerFile, dataDir) : undefined;
  const tokenizerFile = given?.file ?? trainedFile;
  let tokenizer: TextTokenizer | undefined = given?.tokenizer;
  const tokenizerId = tokenizer ? tokenizer.hash : `trained-wordpiece-v1:${vocabSize}`;
  const cacheKey = cacheKeyOf(source.hash, tokenizerId, params);

  // one build of a dataset at a time on a data directory: a second one (another terminal, a founder)
  // would remove the first's shards when it begins, and both would fail
  const building = lockBuild(dataDir, cacheKey, source.description);
  try {
    removeAbandonedBuilds(datasets, dataDir);
    const existing = datasets.get(cacheKey);
    if (existing?.complete && fs.existsSync(existing.tokenizerFile)) {
      datasets.touch(cacheKey);
      return { info: datasets.get(cacheKey)!, reused: true, skipped: 0, evicted: [] };
    }

    if (!tokenizer) {
      // Skips are reported once, by the tokenize pass below; a source with no text left ends here, so it reports them
      const skips: SkippedInput[] = [];
      if (!fs.existsSync(trainedFile) && !(await trainTokenizer(source.documents((s) => skips.push(s)), trainedFile, vocabSize, (documents) => onProgress({ phase: 'train-tokenizer', documents })))) {
        skips.forEach(onSkip);
        const listed = skips.slice(0, 3).map((s) => `${s.file}: ${s.reason}`);
        throw new DataError(`source ${source.description} has no text to train a tokenizer on (${skipped} input(s) skipped${listed.length > 0 ? `: ${listed.join('; ')}${skips.length > listed.length ? '; …' : ''}` : ''})`);
      }
      tokenizer = loadTokenizer(trainedFile);
    }
    const tok: TextTokenizer = tokenizer;

    datasets.begin({ cacheKey, source: source.description, datasetHash: source.hash, tokenizerHash: tok.hash, tokenizerFile, params, vocabSize: tok.vocabSize });
    const rng = new Prng(`examples:${params.seed}`);
    const shardExamples = options.shardExamples ?? DEFAULT_SHARD_EXAMPLES;
    const stats = { documents: 0, sentences: 0, examples: 0, tokens: 0, shardCount: 0 };
    let pending: SopExample[] = [];
    let bytes = 0;
    const evicted: string[] = [];
    // the quota holds while the build grows (within a shard): other datasets go first, and a build that alone passes it stops
    const flush = () => {
      if (pending.length === 0) return;
      const shard = datasets.writeShard(cacheKey, stats.shardCount++, pending, tok.vocabSize);
      stats.tokens += shard.tokens;
      stats.examples += pending.length;
      pending = [];
      bytes += shard.bytes;
      if (bytes > quota) throw new DataError(`dataset ${cacheKey} (${source.description}) passed the cache quota of ${(quota / 1024 ** 2).toFixed(1)} MB after ${stats.documents} documents (${stats.shardCount} shards, ${(bytes / 1024 ** 2).toFixed(1)} MB): its shards were removed${evicted.length > 0 ? ` (evicted for it meanwhile: ${evicted.join(', ')})` : ''}; give a larger --cache-quota to \`cohort data prepare\` (a run founded with --data-source then reuses the dataset), or a smaller source (--max-documents)`);
      if (datasets.totalBytes() > quota) evicted.push(...datasets.evictToQuota(quota, cacheKey));
    };
    try {
      for await (const doc of source.documents(onSkip)) {
        const sentences: number[][] = [];
        for (const para of doc.paragraphs) for (const s of splitSentences(para)) sentences.push(tok.encode(s));
        stats.documents++;
        stats.sentences += sentences.length;
        for (const e of createExamples(sentences, params, rng)) {
          pending.push(e);
          if (pending.length >= shardExamples) flush();
        }
        onProgress({ phase: 'tokenize', documents: stats.documents, examples: stats.examples + pending.length, tokens: stats.tokens });
        // Let the event loop breathe (dashboard, IPC, signals) while a large corpus is tokenized.
        if (stats.documents % 16 === 0) await new Promise((resolve) => setImmediate(resolve));
      }
      flush();
      if (stats.examples === 0) throw new DataError(`source ${source.description} gave no training examples (${stats.documents} documents, ${stats.sentences} sentences, ${skipped} inputs skipped): each example needs a document with at least two sentences`);
      datasets.finish(cacheKey, stats);
    } catch (err) {
      datasets.remove(cacheKey);
      throw err;
    }
    return { info: datasets.get(cacheKey)!, reused: false, skipped, evicted };
  } finally {
    building.release();
  }
}

/** First pass: count words, train WordPiece, write tokenizer.json atomically (temp file + rename); false when the documents hold no word. */
async function trainTokenizer(documents: AsyncIterable<{ paragraphs: readonly string[] }>, file: string, vocabSize: number, onDocument: (n: number) => void): Promise<boolean> {
  const counter = new WordCounter();
  let n = 0;
  for await (const doc of documents) {
    for (const p of doc.paragraphs) counter.add(p);
    onDocument(++n);
  }
  if (counter.counts.size === 0) return false;
  writeTokenizerFile(file, JSON.stringify(trainWordPiece(counter.counts, { vocabSize })));
  return true;
}

const buildLockFile = (dataDir: string, cacheKey: string) => path.resolve(dataDir, 'data', 'building', `${cacheKey}.lock`);

function lockBuild(dataDir: string, cacheKey: string, source: string): { release(): void } {
  const file = buildLockFile(dataDir, cacheKey);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const lock = tryLockFile(file);
  if (!lock) throw new DataError(`dataset ${cacheKey} (${source}) is being prepared by another process on ${dataDir} (cohort data prepare, or cohort run --data-source): wait until it ends, then run this again to reuse it`);
  return lock;
}

/** The shards of builds whose process died (killed, power cut: their lock is free) are never read: they go, and their disk space with them. */
function removeAbandonedBuilds(datasets: DatasetStore, dataDir: string): void {
  for (const cacheKey of datasets.unfinishedBuilds()) {
    const file = buildLockFile(dataDir, cacheKey);
    const lock = fs.existsSync(file) ? tryLockFile(file) : { release: () => {} };
    if (!lock) continue; // being built now
    try {
      datasets.remove(cacheKey);
    } finally {
      lock.release();
    }
  }
}
