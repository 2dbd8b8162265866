// Peak memory of `prepare` on a large WikiText file (the seeds' wiki.train.raw is ~540 MB): the file
// is generated in a temporary folder from the bundled corpus (articles with ` = Title = ` headings),
// prepared with a trained tokenizer as `cohort data prepare --source FILE` does, and deleted.
// COHORT_BENCH_RSS_MB sets its size (default 500). Goal: peak RSS under 1.5 GB.
// Last line: one JSON object; `peak_rss_mb` is the process's maximum resident set size.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundledCorpus, readBundledDocument } from '../src/data/bundled-corpus.js';
import { prepareDataset, type PrepareEvent } from '../src/data/prepare.js';
import { openStore } from '../src/store/index.js';
import { reportJson } from './_report.js';

const TARGET_MB = Number(process.env.COHORT_BENCH_RSS_MB ?? 500);
const GOAL_MB = 1536;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-bench-rss-'));
try {
  const file = path.join(dir, 'wiki.train.raw');
  const out = fs.openSync(file, 'w');
  let bytes = 0;
  let articles = 0;
  const corpus = bundledCorpus();
  // Written an article at a time: the generator holds one address, not the file.
  for (let round = 0; bytes < TARGET_MB * 1024 ** 2; round++) {
    for (const f of corpus.files) {
      const doc = readBundledDocument(f);
      const text = ` = ${doc.title} ${round} = \n\n${doc.paragraphs.map((p) => ` ${p} \n`).join('\n')}\n`;
      bytes += fs.writeSync(out, text);
      articles++;
      if (bytes >= TARGET_MB * 1024 ** 2) break;
    }
  }
  fs.closeSync(out);
  console.log(`generated ${(bytes / 1024 ** 2).toFixed(0)} MB of WikiText raw (${articles} articles) in ${file}`);

  const store = openStore(dir);
  let sampledPeak = 0;
  const sampler = setInterval(() => (sampledPeak = Math.max(sampledPeak, process.memoryUsage.rss())), 200);
  const t0 = performance.now();
  // A line a minute, so a run cut short on a busy machine still tells how far it got and at what peak.
  let last: PrepareEvent | undefined;
  const ticker = setInterval(() => {
    const where = last?.phase === 'tokenize' ? `tokenizing: ${last.documents} documents, ${last.tokens} tokens` : last?.phase === 'train-tokenizer' ? `training the tokenizer: ${last.documents} documents` : 'starting';
    console.log(`${((performance.now() - t0) / 1000).toFixed(0)} s, ${where}; peak RSS so far ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB`);
  }, 60_000);
  try {
    const r = await prepareDataset({ store, dataDir: dir, source: file, maxSeqLen: 512, cacheQuotaBytes: 64 * 1024 ** 3, onProgress: (e) => (last = e) });
    const seconds = (performance.now() - t0) / 1000;
    clearInterval(sampler);
    const peakMb = process.resourceUsage().maxRSS / 1024;
    console.log(`prepared ${r.info.documents} documents → ${r.info.examples} examples, ${r.info.tokens} tokens, ${r.info.shardCount} shards (${(r.info.bytes / 1024 ** 2).toFixed(0)} MB) in ${seconds.toFixed(0)} s`);
    console.log(`peak RSS ${peakMb.toFixed(0)} MB (sampled every 200 ms: ${(sampledPeak / 1024 ** 2).toFixed(0)} MB); goal < ${GOAL_MB} MB`);
    reportJson({ source_mb: Math.round(bytes / 1024 ** 2), peak_rss_mb: Math.round(peakMb), goal_rss_mb: GOAL_MB, prepare_s: Math.round(seconds), tokens: r.info.tokens });
  } finally {
    clearInterval(sampler);
    clearInterval(ticker);
    store.close();
  }
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
