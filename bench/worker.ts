/**
 * WorkerBackend vs OrtBackend: the median forward + backward time at B=4, S=128 with onnxruntime on
 * the JS thread (inline) and in a worker thread, alternating in one run so both see the same load →
 * worker_vs_inline; and the 1 ms timer ticks the event loop delivers during one pass (inline
 * onnxruntime holds the JS thread: 0–1). Also the JS thread's own cost per call with the worker: the
 * copy of the parameters into the transfer buffer (copy_ms).
 * Usage: npm run bench -- worker [--presets tiny,base] [--rounds N] [--threads T]
 */
import { PRESETS } from '../src/engine/albert/config.js';
import { initAlbertParams } from '../src/engine/albert/params.js';
import type { TrainingBackend } from '../src/engine/backend.js';
import type { AlbertBatch } from '../src/engine/batch.js';
import { OrtBackend } from '../src/engine/ort-backend.js';
import type { ParameterSet } from '../src/engine/params.js';
import { Rng } from '../src/engine/rng.js';
import { syntheticBatch } from '../src/engine/synthetic.js';
import { WorkerBackend } from '../src/engine/worker-backend.js';
import { countArg, presetsArg } from './_args.js';
import { median, reportJson } from './_report.js';

const B = 4;
const S = 128;

const presets = presetsArg('--presets', 'tiny,base');
const rounds = countArg('--rounds', 5, 1000);
const threads = countArg('--threads', 1, 256);

/** One pass: its wall time and the 1 ms timer ticks delivered meanwhile. */
async function timedPass(backend: TrainingBackend, params: ParameterSet, batch: AlbertBatch, grads: ParameterSet): Promise<{ ms: number; ticks: number }> {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 1);
  const t = performance.now();
  await backend.forwardBackward(params, batch, grads);
  const ms = performance.now() - t;
  clearInterval(timer);
  return { ms, ticks };
}

const figures: Record<string, number> = {};
console.log(`B=${B}, S=${S}, ${threads} ORT thread(s), ${rounds} rounds, medians:`);
for (const preset of presets) {
  const config = PRESETS[preset];
  const params = initAlbertParams(config, 0);
  const grads = params.zerosLike();
  const batch = syntheticBatch(config, B, S, new Rng(1));
  const inline = new OrtBackend(config, { provider: 'cpu', intraOpThreads: threads });
  const worker = new WorkerBackend(config, { provider: 'cpu', intraOpThreads: threads });
  try {
    // warm-up: builds both sessions and tiers the kernels up
    await inline.forwardBackward(params, batch, grads);
    await worker.forwardBackward(params, batch, grads);
    const runs = { inline: [] as Array<{ ms: number; ticks: number }>, worker: [] as Array<{ ms: number; ticks: number }> };
    for (let r = 0; r < rounds; r++) {
      runs.inline.push(await timedPass(inline, params, batch, grads));
      runs.worker.push(await timedPass(worker, params, batch, grads));
    }
    const copy = params.zerosLike().data;
    const copies = Array.from({ length: 5 }, () => {
      const t = performance.now();
      copy.set(params.data);
      return performance.now() - t;
    });
    const [inlineMs, workerMs] = [median(runs.inline.map((x) => x.ms)), median(runs.worker.map((x) => x.ms))];
    const [inlineTicks, workerTicks] = [median(runs.inline.map((x) => x.ticks)), median(runs.worker.map((x) => x.ticks))];
    const copyMs = median(copies);
    console.log(`${preset} (${params.size} parameters):`);
    console.log(`  inline  ${inlineMs.toFixed(1)} ms per pass, ${inlineTicks} timer ticks during it`);
    console.log(`  worker  ${workerMs.toFixed(1)} ms per pass, ${workerTicks} timer ticks during it (ratio ${(workerMs / inlineMs).toFixed(3)})`);
    console.log(`  the JS thread's copy of the parameters per call: ${copyMs.toFixed(2)} ms`);
    Object.assign(figures, {
      [`inline_ms_${preset}`]: inlineMs,
      [`worker_ms_${preset}`]: workerMs,
      [`worker_vs_inline_${preset}`]: workerMs / inlineMs,
      [`ticks_inline_${preset}`]: inlineTicks,
      [`ticks_worker_${preset}`]: workerTicks,
      [`copy_ms_${preset}`]: copyMs,
    });
  } finally {
    await Promise.all([inline.close(), worker.close()]);
  }
}
reportJson({ batch_size: B, seq_len: S, threads, rounds, ...figures });
