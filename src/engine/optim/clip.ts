import type { ParameterSet } from '../params.js';

/** Global L2 norm of all gradients together (accumulated in float64). */
export function gradNorm(grads: ParameterSet): number {
  return Math.sqrt(sumOfSquares(grads.data, 0, grads.data.length));
}

/**
 * Scales `grads` in place so their global L2 norm is at most `maxNorm` (torch's
 * `clip_grad_norm_`: factor maxNorm/(norm + 1e-6), applied only when below 1) and returns the norm
 * before clipping. A NaN or infinite norm throws, naming the first non-finite tensor, and leaves
 * the gradients untouched: such a step must be skipped, not taken.
 */
export function clipGradNorm(grads: ParameterSet, maxNorm: number): number {
  if (!(maxNorm > 0)) throw new RangeError(`maxNorm must be a number > 0 (Infinity only measures); got ${maxNorm}`);
  const norm = gradNorm(grads);
  if (!Number.isFinite(norm)) {
    const bad = grads.specs.find((s) => !Number.isFinite(sumOfSquares(grads.data, s.offset, s.offset + s.size)));
    throw new Error(`gradient norm is ${norm}: tensor ${bad?.name ?? '(a sum of finite squares overflowed)'} has non-finite values; skip this step`);
  }
  const factor = maxNorm / (norm + 1e-6);
  if (factor < 1) scale(grads.data, factor);
  return norm;
}

function sumOfSquares(x: Float32Array, start: number, end: number): number {
  // four independent sums so the additions do not wait on each other
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let i = start;
  for (; i + 3 < end; i += 4) {
    const a = x[i]!;
    const b = x[i + 1]!;
    const c = x[i + 2]!;
    const d = x[i + 3]!;
    s0 += a * a;
    s1 += b * b;
    s2 += c * c;
    s3 += d * d;
  }
  for (; i < end; i++) s0 += x[i]! * x[i]!;
  return s0 + s1 + s2 + s3;
}

function scale(x: Float32Array, factor: number): void {
  for (let i = 0; i < x.length; i++) x[i] = x[i]! * factor;
}
