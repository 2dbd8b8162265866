import type { ParameterSet } from '../params.js';
import { blockOps } from './block-ops.js';

/** Global L2 norm of all gradients together (accumulated in float64). */
export function gradNorm(grads: ParameterSet): number {
  return Math.sqrt(blockOps().sumSquares(grads.data));
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
    const bad = grads.specs.find((s) => !grads.data.subarray(s.offset, s.offset + s.size).every(Number.isFinite));
    throw new Error(`gradient norm is ${norm}: tensor ${bad?.name ?? '(a sum of finite squares overflowed)'} has non-finite values; skip this step`);
  }
  const factor = maxNorm / (norm + 1e-6);
  if (factor < 1) blockOps().scaleInto(grads.data, grads.data, factor);
  return norm;
}
