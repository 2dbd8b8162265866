/**
 * delay_optimizer_step benchmark: the time from an epoch's end to the next micro-batch's gradient,
 * with the LAMB step taken first (sequential: clip + LAMB, then forward/backward) and with it taken
 * through DelayedStep.overlap (delayed: the micro-batch on the compute copy, the step on the master
 * meanwhile), alternating in one run so both see the same load → delayed_vs_sequential. The passes run
 * in WorkerBackend's thread, as in the training loops, so the step really overlaps the micro-batch;
 * also the event loop's 1 ms timer ticks during one step + micro-batch (bench/worker.ts compares inline).
 * Usage: npm run bench -- delay [--preset tiny|base|large] [--rounds N] [--threads T]
 */
import { PRESETS } from '../src/engine/albert/config.js';
import { initAlbertParams } from '../src/engine/albert/params.js';
import { clipGradNorm, createOptimizer } from '../src/engine/optim/index.js';
import { Rng } from '../src/engine/rng.js';
import { syntheticBatch } from '../src/engine/synthetic.js';
import { WorkerBackend } from '../src/engine/worker-backend.js';
import { DelayedStep } from '../src/collab/delayed-step.js';
import { countArg, presetArg } from './_args.js';
import { median, reportJson } from './_report.js';

const preset = presetArg('--preset', 'tiny');
const rounds = countArg('--rounds', 6, 1000);
const threads = countArg('--threads', 1, 256);

const config = PRESETS[preset];
const master = initAlbertParams(config, 0);
const optimizer = createOptimizer(master, { kind: 'lamb' });
const averaged = master.zerosLike();
const grads = master.zerosLike();
const batch = syntheticBatch(config, 4, 128, new Rng(1));
const backend = new WorkerBackend(config, { provider: 'cpu', intraOpThreads: threads });
const delayed = new DelayedStep(master, true);
const lambStep = (): void => {
  clipGradNorm(averaged, 1);
  optimizer.step(master, averaged, 1e-4);
};

try {
  // warm-up: builds the session, tiers the kernels up, and gives a realistic gradient to step on
  await backend.forwardBackward(master, batch, averaged);
  lambStep();
  const ticksDuring: number[] = [];
  const times = { sequential: [] as number[], delayed: [] as number[], lamb: [] as number[] };
  for (let r = 0; r < rounds; r++) {
    let t = performance.now();
    lambStep();
    times.lamb.push(performance.now() - t);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    t = performance.now();
    lambStep();
    await backend.forwardBackward(master, batch, grads);
    times.sequential.push(performance.now() - t);
    clearInterval(timer);
    ticksDuring.push(ticks);
    delayed.defer(lambStep);
    t = performance.now();
    await delayed.overlap((compute) => backend.forwardBackward(compute, batch, grads));
    times.delayed.push(performance.now() - t);
  }
  const [seq, del, lamb] = [median(times.sequential), median(times.delayed), median(times.lamb)];
  console.log(`${preset} (${master.size} parameters), ${threads} ORT thread(s), ${rounds} rounds, medians:`);
  console.log(`  LAMB step alone            ${lamb.toFixed(2)} ms`);
  console.log(`  step, then micro-batch     ${seq.toFixed(2)} ms`);
  console.log(`  micro-batch, step delayed  ${del.toFixed(2)} ms  (ratio ${(del / seq).toFixed(3)})`);
  console.log(`  1 ms timer ticks during a step + micro-batch: ${median(ticksDuring)} (onnxruntime in a worker thread)`);
  reportJson({ preset, params: master.size, threads, rounds, lamb_ms: lamb, sequential_ms: seq, delayed_ms: del, delayed_vs_sequential: del / seq, timer_ticks_during_run: median(ticksDuring) });
} finally {
  await backend.close();
}
