// Data pipeline throughput: tokens/s of `prepare` and of batch production, against what the large
// preset consumes. Last line: one JSON object; `ratio_vs_large` = batch production ÷ large consumption.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { prepareDataset } from '../src/data/prepare.js';
import { openBatchStream } from '../src/data/stream.js';
import { openStore } from '../src/store/index.js';
import { median, reportJson } from './_report.js';

// The large preset (ALBERT-large, as the seeds' runs) trains on B=8 rows of S=512 tokens per step.
const LARGE_BATCH = 8;
const LARGE_SEQ = 512;
// Assumed large-preset step time on this machine, until the lead wires the engine's measured figure.
// Deliberately fast (conservative for the ratio): ALBERT-large needs ~1.8 GFLOP per token for forward
// + backward, ~7 TFLOP per 8×512 step, i.e. minutes on a 2-core CPU; 1 s is the pace of a fast GPU.
const LARGE_STEP_S = Number(process.env.COHORT_BENCH_LARGE_STEP_S ?? 1.0);
const DOCUMENTS = 60;
const BATCHES = 300;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-bench-data-'));
const store = openStore(dir);
try {
  // Train the tokenizer once (timed separately) so the prepare runs below measure tokenize + examples + shards.
  let t0 = performance.now();
  const warm = await prepareDataset({ store, dataDir: dir, maxDocuments: DOCUMENTS, maxSeqLen: LARGE_SEQ, seed: 0 });
  const trainAndPrepareS = (performance.now() - t0) / 1000;
  console.log(`corpus: ${warm.info.source}, first ${DOCUMENTS} documents; vocabulary ${warm.info.vocabSize} (WordPiece trained on it)`);
  console.log(`first prepare incl. tokenizer training: ${trainAndPrepareS.toFixed(2)} s`);

  const prepareRates: number[] = [];
  for (let seed = 1; seed <= 3; seed++) {
    t0 = performance.now();
    const r = await prepareDataset({ store, dataDir: dir, maxDocuments: DOCUMENTS, maxSeqLen: LARGE_SEQ, seed });
    prepareRates.push(r.info.tokens / ((performance.now() - t0) / 1000));
  }
  const prepareTps = median(prepareRates);
  console.log(`prepare (tokenize, SOP pairs, shards): ${Math.round(prepareTps)} tokens/s (median of 3, ${warm.info.tokens} tokens each)`);

  const produce = async (worker: boolean): Promise<number> => {
    const stream = openBatchStream({ store, cacheKey: warm.info.cacheKey, batchSize: LARGE_BATCH, seqLen: LARGE_SEQ, seed: 1, peerId: `bench-${worker}`, worker });
    try {
      for (let i = 0; i < 10; i++) await stream.next(); // start-up (worker spawn, first shard) excluded
      const start = performance.now();
      for (let i = 0; i < BATCHES; i++) await stream.next();
      return (BATCHES * LARGE_BATCH * LARGE_SEQ) / ((performance.now() - start) / 1000);
    } finally {
      await stream.close();
    }
  };
  const inThread = await produce(false);
  const viaWorker = await produce(true);
  console.log(`batch production (${LARGE_BATCH}×${LARGE_SEQ}, dynamic token masking): worker thread ${Math.round(viaWorker)} tokens/s, in-thread ${Math.round(inThread)} tokens/s`);

  const largeTps = (LARGE_BATCH * LARGE_SEQ) / LARGE_STEP_S;
  const ratio = viaWorker / largeTps;
  console.log(`large preset consumption: ASSUMED ${LARGE_BATCH}×${LARGE_SEQ} tokens per ${LARGE_STEP_S} s step = ${Math.round(largeTps)} tokens/s (set COHORT_BENCH_LARGE_STEP_S to the engine's measured step time)`);
  console.log(`batch production is ${ratio.toFixed(1)}× the large preset's consumption (target ≥ 10×)`);
  reportJson({
    prepare_tokens_per_s: Math.round(prepareTps),
    batch_tokens_per_s: Math.round(viaWorker),
    batch_tokens_per_s_in_thread: Math.round(inThread),
    large_consumption_tokens_per_s: Math.round(largeTps),
    large_step_s_assumed: LARGE_STEP_S,
    ratio_vs_large: Number(ratio.toFixed(2)),
  });
} finally {
  store.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
