// `npm run bench -- optim`: one LAMB and one AdamW step over ALBERT-large's 17.8M parameters, next
// to peers over the same amount of memory measured in the same run: a memcpy of the parameter
// buffer (the memory-bound floor: one read and one write stream) and a plain JS axpy loop. When a
// Python with torch is around, both optimizers are also checked against PyTorch's numbers.
import { clipGradNorm, GradientAccumulator } from '../src/engine/optim/index.js';
import { ParameterSet } from '../src/engine/params.js';
import { albertLargeLayout, ALBERT_LARGE_PARAMS, fillNormal, prepareOptimizerStep, timeOnce } from './_lamb.js';
import { median, reportJson } from './_report.js';
import { crossCheckTorch } from './_torch_check.js';

/** Largest acceptable difference from torch after five steps on weights of scale 0.05 (a few float32 ulps). */
const TORCH_TOLERANCE = 1e-6;
const ROUNDS = 9;

const n = ALBERT_LARGE_PARAMS;
const x = new Float32Array(n);
const y = new Float32Array(n);
fillNormal(x, 1, 3);
const grads = ParameterSet.allocate(albertLargeLayout());
fillNormal(grads.data, 1e-3, 4);
const accumulator = new GradientAccumulator(grads);
const runs = {
  lamb: prepareOptimizerStep('lamb', n).step,
  adamw: prepareOptimizerStep('adamw', n).step,
  // measuring the norm only (maxNorm above it), so every round sees the same gradients
  clip: (): number => clipGradNorm(grads, 1e9),
  accumulate: (): void => {
    accumulator.reset();
    accumulator.add(grads, 4);
    accumulator.add(grads, 4);
  },
  memcpy: (): void => y.set(x),
  axpy: (): void => {
    for (let i = 0; i < n; i++) y[i] = y[i]! + 1e-3 * x[i]!;
  },
};
// interleaved rounds, so that load from other processes falls on every candidate alike
const keys = ['lamb', 'memcpy', 'adamw', 'axpy', 'clip', 'accumulate'] as const;
const samples = Object.fromEntries(keys.map((k) => [k, [] as number[]])) as Record<(typeof keys)[number], number[]>;
for (const key of ['axpy', 'clip', 'accumulate'] as const) runs[key](); // compile before timing
for (let r = 0; r < ROUNDS; r++) for (const key of keys) samples[key].push(timeOnce(runs[key]));
const lamb = { msPerStep: median(samples.lamb) };
const adamw = { msPerStep: median(samples.adamw) };
const copyMs = median(samples.memcpy);
const axpyMs = median(samples.axpy);
const clipMs = median(samples.clip);
const accumulateMs = median(samples.accumulate) / 2;

const f = (ms: number): string => `${ms.toFixed(1)} ms`;
console.log(`parameters: ${n} (ALBERT-large layout, vocab 30000)`);
console.log(`LAMB step:  ${f(lamb.msPerStep)}  (target < 60 ms)`);
console.log(`AdamW step: ${f(adamw.msPerStep)}`);
console.log(`grad norm (clipping): ${f(clipMs)}, accumulate one micro-batch: ${f(accumulateMs)}`);
console.log(`peers: memcpy ${f(copyMs)}, JS axpy ${f(axpyMs)}`);
console.log(`LAMB ÷ memcpy ${(lamb.msPerStep / copyMs).toFixed(2)}, LAMB ÷ JS axpy ${(lamb.msPerStep / axpyMs).toFixed(2)}`);
const torch = crossCheckTorch();
if ('skipped' in torch) console.log(`torch cross-check skipped: ${torch.skipped}`);
else {
  for (const [kind, diff] of Object.entries(torch.maxAbsDiff)) {
    const ok = diff <= TORCH_TOLERANCE;
    console.log(`torch cross-check ${kind}: max |ours − torch| after 5 steps = ${diff.toExponential(2)} ${ok ? 'ok' : `MISMATCH (> ${TORCH_TOLERANCE})`}`);
    if (!ok) process.exitCode = 1;
  }
}
const round = (v: number): number => Math.round(v * 100) / 100;
reportJson({
  params: n,
  lamb_ms_large: round(lamb.msPerStep),
  adamw_ms_large: round(adamw.msPerStep),
  grad_norm_ms_large: round(clipMs),
  accumulate_ms_large: round(accumulateMs),
  memcpy_ms: round(copyMs),
  axpy_ms: round(axpyMs),
  lamb_vs_memcpy: round(lamb.msPerStep / copyMs),
  lamb_vs_axpy: round(lamb.msPerStep / axpyMs),
  torch_adamw_max_abs_diff: 'skipped' in torch ? null : torch.maxAbsDiff.adamw,
  torch_lamb_max_abs_diff: 'skipped' in torch ? null : torch.maxAbsDiff.lamb,
});
