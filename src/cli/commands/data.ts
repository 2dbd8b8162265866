import fs from 'node:fs';
import type { Command } from 'commander';
import { z } from 'zod';
import type { DatasetInfo, PrepareEvent } from '../../data/index.js';
import { MASKING_MODES } from '../../data/masking.js';
import { DEFAULT_RESERVE_BYTES } from '../../data/download.js';
import { SOURCE_FORMATS } from '../../data/sources.js';
import { IGNORE_INDEX } from '../../engine/batch.js';
import { addSettingOptions, commandContext, flagAction } from '../context.js';
import { CommandFailure } from '../failure.js';
import { flagRow } from '../flag-table.js';
import { stopOnSignal } from '../stop-signal.js';

const int = z.number().int();

/** What `data stats` and `data sample` say of a data directory that does not exist: they read, so they create nothing (a mistyped --data-dir shows). */
function missingDataDir(dir: string): string {
  return `no prepared dataset: the data directory ${dir} does not exist; run \`cohort data prepare\` (or check --data-dir)`;
}

/** `--disk-reserve`, of `data prepare` and of a founder's `run --data-source`: free space a URL source's download leaves (MiB, as --cache-quota). */
export const DISK_RESERVE_FLAG = flagRow({
  schema: z.number().finite().min(0),
  arg: '<MiB>',
  description: `free space a URL source's download leaves on the data directory's disk (MiB, fractions allowed): a file that would pass it is refused before it is written; default: ${DEFAULT_RESERVE_BYTES / 2 ** 20}`,
});

/** DISK_RESERVE_FLAG's value in bytes (undefined: the download's default). */
export function diskReserveBytes(mib: number | undefined): number | undefined {
  return mib === undefined ? undefined : Math.floor(mib * 2 ** 20);
}

const PREPARE_FLAGS = {
  source: flagRow({ schema: z.string(), default: 'bundled', arg: '<spec>', description: 'corpus: "bundled" (offline State of the Union corpus), a text/WikiText/JSONL file, an archive (.zip .tar .tar.gz .tgz .gz), a folder, or an http(s) URL' }),
  format: flagRow({ schema: z.enum(SOURCE_FORMATS), default: 'auto', arg: '<format>', description: 'how to read files' }),
  field: flagRow({ schema: z.string(), default: 'text', arg: '<name>', description: 'JSONL: the field holding the text' }),
  sha256: flagRow({ schema: z.string().regex(/^[0-9a-fA-F]{64}$/), arg: '<hex>', accepted: '64 hex digits', description: 'expected sha256 of the URL\'s download or of the source file (verified before use)' }),
  tokenizer: flagRow({ schema: z.string().refine((f) => fs.existsSync(f)), arg: '<file>', accepted: 'an existing tokenizer.json file', description: 'a Hugging Face tokenizer.json (Unigram as albert-*-v2, WordPiece or BPE; a copy is kept in the data directory); default: train a WordPiece tokenizer on the corpus and save it next to the data' }),
  vocabSize: flagRow({ schema: int.min(100).max(200_000), default: 8000, description: 'vocabulary size when training a tokenizer (100–200000)' }),
  maxSeqLen: flagRow({ schema: int.min(16).max(8192), default: 128, description: 'max_seq_length of an example incl. [CLS]/[SEP] (512 for the large preset; 16–8192)' }),
  shortSeqProb: flagRow({ schema: z.number().min(0).max(1), default: 0.1, arg: '<p>', description: 'probability of a shorter target length (0–1)' }),
  maxDocuments: flagRow({ schema: int.min(1), description: 'read only the first N documents' }),
  seed: flagRow({ schema: int.min(0).max(2 ** 31 - 1), default: 0, description: 'seed for building the examples' }),
  cacheQuota: flagRow({ schema: int.min(1).max(10_000_000), default: 2048, arg: '<mb>', description: 'disk quota for all cached shards in MB: least recently used datasets are evicted as the new one is built, and a dataset that alone passes it is not kept (the prepare stops)' }),
  diskReserve: DISK_RESERVE_FLAG,
  json: flagRow({ schema: z.boolean(), description: 'print the result as one JSON object' }),
};

const SAMPLE_FLAGS = {
  n: flagRow({ schema: int.min(1).max(100), default: 3, arg: '<count>', description: 'number of examples (1–100)' }),
  cacheKey: flagRow({ schema: z.string(), arg: '<key>', description: 'dataset to sample (default: the most recently used)' }),
  masking: flagRow({ schema: z.enum(MASKING_MODES), default: 'token', arg: '<mode>', description: 'masking' }),
  seed: flagRow({ schema: int.min(0).max(2 ** 31 - 1), default: 0, description: 'seed for order and masking' }),
};

const mb = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(1)} MB`;

/** One progress line on stderr: rewritten in place on a terminal, at most every few seconds otherwise. */
export function preparationProgress(): { update: (e: PrepareEvent) => void; done: () => void } {
  const tty = process.stderr.isTTY === true;
  let last = 0;
  let shown = '';
  const text = (e: PrepareEvent) => {
    if (e.phase === 'download') {
      const { received, total, attempt } = e.progress;
      const pct = total ? ` ${((100 * received) / total).toFixed(1)}%` : '';
      return `downloading ${mb(received)}${total ? ` of ${mb(total)}` : ''}${pct}${attempt > 1 ? ` (resumed, attempt ${attempt})` : ''}`;
    }
    if (e.phase === 'train-tokenizer') return `training tokenizer: ${e.documents} documents read`;
    return `tokenizing: ${e.documents} documents, ${e.examples} examples, ${e.tokens} tokens in shards`;
  };
  return {
    update(e) {
      const now = Date.now();
      if (now - last < (tty ? 200 : 5000)) return;
      last = now;
      shown = text(e);
      process.stderr.write(tty ? `\r${shown.padEnd(79)}` : `${shown}\n`);
    },
    done() {
      if (tty && shown) process.stderr.write('\n');
    },
  };
}

function describe(d: DatasetInfo): Record<string, unknown> {
  return {
    cacheKey: d.cacheKey,
    datasetId: d.datasetId,
    tokenizerSha256: d.tokenizerHash,
    source: d.source,
    documents: d.documents,
    sentences: d.sentences,
    examples: d.examples,
    tokens: d.tokens,
    shards: d.shardCount,
    bytes: d.bytes,
    vocabSize: d.vocabSize,
    maxSeqLen: d.params.maxSeqLen,
    tokenizer: d.tokenizerFile,
    lastUsed: new Date(d.lastUsedAt).toISOString(),
  };
}

export function registerData(program: Command): void {
  const data = program.command('data').description('prepare the training corpus (tokenize, build ALBERT sentence-order pairs, cache shards) and inspect it');

  const prepare = data
    .command('prepare')
    .description('read a corpus, tokenize it and store ALBERT (MLM + SOP) examples as shards in the data directory; a second run with the same inputs reuses them');
  addSettingOptions(prepare, ['moveAside']);
  flagAction(prepare, PREPARE_FLAGS, async ({ tokenizer, cacheQuota, diskReserve, json, ...opts }, { config, log }) => {
    const [{ loggedStoreOptions, openStore }, { prepareDataset }] = await Promise.all([import('../../store/index.js'), import('../../data/index.js')]);

    const store = openStore(config.dataDir, loggedStoreOptions(config.moveAside, log));
    const progress = preparationProgress();
    // Ctrl-C stops at the next progress step, so the partial shards are removed (a kill would leave them on disk)
    const stop = stopOnSignal();
    try {
      const result = await prepareDataset({
        ...opts,
        store,
        dataDir: config.dataDir,
        tokenizerFile: tokenizer,
        cacheQuotaBytes: cacheQuota * 1024 ** 2,
        reserveBytes: diskReserveBytes(diskReserve),
        onProgress: (e) => (stop.signal.throwIfAborted(), progress.update(e)),
        onWarning: (m) => log.warn(m),
      }).catch((err: unknown) => {
        throw err === stop.signal.reason ? new CommandFailure('stopped: the dataset was not completed and its partial shards were removed (a download keeps its part for the next try)') : err;
      });
      progress.done();
      if (result.skipped > 0) log.warn(`${result.skipped} input file(s) or line(s) skipped (see the warnings above)`);
      for (const key of result.evicted) log.info(`evicted dataset ${key} to stay within the cache quota`);
      const d = result.info;
      if (json) process.stdout.write(JSON.stringify({ reused: result.reused, skipped: result.skipped, ...describe(d) }) + '\n');
      else
        process.stdout.write(
          `${result.reused ? 'reused' : 'prepared'} dataset ${d.cacheKey}: ${d.documents} documents, ${d.sentences} sentences, ${d.examples} examples, ${d.tokens} tokens in ${d.shardCount} shards (${mb(d.bytes)})\n` +
            `vocabulary ${d.vocabSize} from ${d.tokenizerFile}\n`,
        );
    } finally {
      stop.release();
      progress.done();
      store.close();
    }
  });

  const stats = data
    .command('stats')
    .description('show the prepared datasets: documents, sentences, examples, tokens, shards and cache size')
    .option('--json', 'print one JSON object');
  addSettingOptions(stats, ['moveAside']);
  stats.action(async (opts: { json?: boolean }) => {
    const { config, log } = commandContext(stats);
    if (!fs.existsSync(config.dataDir)) {
      process.stdout.write(opts.json ? JSON.stringify({ cacheBytes: 0, datasets: [] }) + '\n' : `${missingDataDir(config.dataDir)}\n`);
      return;
    }
    const [{ loggedStoreOptions, openStore }, { datasetStore }] = await Promise.all([import('../../store/index.js'), import('../../data/index.js')]);
    const store = openStore(config.dataDir, loggedStoreOptions(config.moveAside, log));
    try {
      const datasets = datasetStore(store);
      const list = datasets.list();
      const cacheBytes = datasets.totalBytes();
      if (opts.json) {
        process.stdout.write(JSON.stringify({ cacheBytes, datasets: list.map(describe) }) + '\n');
        return;
      }
      if (list.length === 0) process.stdout.write('no prepared dataset; run `cohort data prepare`\n');
      for (const d of list) {
        process.stdout.write(
          `${d.cacheKey}  ${d.source}\n  documents ${d.documents}  sentences ${d.sentences}  examples ${d.examples}  tokens ${d.tokens}  shards ${d.shardCount}  size ${mb(d.bytes)}\n  vocabulary ${d.vocabSize}  max_seq_length ${d.params.maxSeqLen}  tokenizer ${d.tokenizerFile}\n  dataset id ${d.datasetId}\n  tokenizer sha256 ${d.tokenizerHash}\n`,
        );
      }
      process.stdout.write(`cache size ${mb(cacheBytes)} in ${list.length} dataset(s)\n`);
    } finally {
      store.close();
    }
  });

  const sample = data
    .command('sample')
    .description('decode a few masked training examples to show what the model sees: ⟦shown→target⟧ marks each predicted token, with the sentence-order label');
  addSettingOptions(sample, ['moveAside']);
  flagAction(sample, SAMPLE_FLAGS, async ({ n, cacheKey, masking: mode, seed }, { config, log }) => {
    const [{ loggedStoreOptions, openStore }, { BatchProducer, DataError, datasetStore, datasetTokenizer, findDataset }] = await Promise.all([import('../../store/index.js'), import('../../data/index.js')]);
    if (!fs.existsSync(config.dataDir)) throw new DataError(missingDataDir(config.dataDir));
    const store = openStore(config.dataDir, loggedStoreOptions(config.moveAside, log));
    try {
      const info = findDataset(store, cacheKey);
      const tok = datasetTokenizer(info);
      // Read without a cursor: sampling must not move any peer's read position.
      const producer = new BatchProducer(datasetStore(store), {
        cacheKey: info.cacheKey,
        batchSize: n,
        seqLen: info.params.maxSeqLen,
        seed,
        peerId: 'cohort-data-sample',
        vocab: { vocabSize: tok.vocabSize, special: tok.special, isSpecial: tok.isSpecial, wordStart: tok.wordStart },
        masking: { mode },
      });
      const { batch } = producer.next();
      for (let r = 0; r < batch.batchSize; r++) {
        const parts: string[] = [];
        let predicted = 0;
        let real = 0;
        for (let i = r * batch.seqLen; i < (r + 1) * batch.seqLen && batch.attentionMask[i] === 1; i++) {
          real++;
          const shown = tok.idToToken(batch.inputIds[i]!);
          const label = batch.labels[i]!;
          if (label === IGNORE_INDEX) parts.push(shown);
          else {
            predicted++;
            parts.push(`⟦${shown}→${tok.idToToken(label)}⟧`);
          }
        }
        const order = batch.sentenceOrderLabel[r] === 1 ? '1 (segments swapped)' : '0 (original order)';
        // WordPiece marks continuations (##), SentencePiece and byte-level BPE mark word starts (▁, Ġ).
        const text = tok.kind === 'WordPiece' ? parts.join(' ').replace(/ ##/g, '') : parts.join('').replace(/[▁Ġ]/g, ' ');
        process.stdout.write(`example ${r + 1}: sentence_order_label ${order}; ${predicted} of ${real} tokens predicted\n  ${text.trim()}\n\n`);
      }
    } finally {
      store.close();
    }
  });
}
