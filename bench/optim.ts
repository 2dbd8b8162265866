// `npm run bench -- optim`: one LAMB and one AdamW step over ALBERT-large's 17.8M parameters, next
// to peers over the same amount of memory measured in the same run: a memcpy of the parameter
// buffer (the memory-bound floor: one read and one write stream) and a plain JS axpy loop.
import { performance } from 'node:perf_hooks';
import { ALBERT_LARGE_PARAMS, fillNormal, timeLambStep, timeOptimizerStep } from './_lamb.js';
import { median, reportJson } from './_report.js';

function timePeer(run: () => void, times = 7): number {
  run();
  const samples: number[] = [];
  for (let i = 0; i < times; i++) {
    const start = performance.now();
    run();
    samples.push(performance.now() - start);
  }
  return median(samples);
}

const n = ALBERT_LARGE_PARAMS;
const x = new Float32Array(n);
const y = new Float32Array(n);
fillNormal(x, 1, 3);
const copyMs = timePeer(() => y.set(x));
const axpyMs = timePeer(() => {
  for (let i = 0; i < n; i++) y[i] = y[i]! + 1e-3 * x[i]!;
});
const lamb = timeLambStep(n);
const adamw = timeOptimizerStep('adamw', n);

const f = (ms: number): string => `${ms.toFixed(1)} ms`;
console.log(`parameters: ${n} (ALBERT-large layout, vocab 30000)`);
console.log(`LAMB step:  ${f(lamb.msPerStep)}  (target < 60 ms)`);
console.log(`AdamW step: ${f(adamw.msPerStep)}`);
console.log(`peers: memcpy ${f(copyMs)}, JS axpy ${f(axpyMs)}`);
console.log(`LAMB ÷ memcpy ${(lamb.msPerStep / copyMs).toFixed(2)}, LAMB ÷ JS axpy ${(lamb.msPerStep / axpyMs).toFixed(2)}`);
const round = (v: number): number => Math.round(v * 100) / 100;
reportJson({
  params: n,
  lamb_ms_large: round(lamb.msPerStep),
  adamw_ms_large: round(adamw.msPerStep),
  memcpy_ms: round(copyMs),
  axpy_ms: round(axpyMs),
  lamb_vs_memcpy: round(lamb.msPerStep / copyMs),
  lamb_vs_axpy: round(lamb.msPerStep / axpyMs),
});
