/**
 * Optimizers for Cohort's training engine, on flat typed arrays (`ParameterSet`): LAMB as hivemind's
 * ALBERT run uses it and AdamW, the learning-rate schedule, gradient clipping and accumulation, and
 * optimizer state for checkpoints.
 *
 * @example
 * const opt = createOptimizer(params, { kind: 'lamb' });
 * const acc = new GradientAccumulator(params);
 * acc.add(gradsOfMicroBatch, 4); // …for each micro-batch
 * const grads = acc.average();
 * clipGradNorm(grads, 1.0);
 * opt.step(params, grads, linearWarmupDecay(epoch, { peakLr: opt.config.lr, warmupSteps: 5000, totalSteps: 125000 }));
 * acc.reset();
 */
import type { ParameterSet } from '../params.js';
import { AdamW } from './adamw.js';
import { resolveOptimizerConfig, type OptimizerConfig } from './config.js';
import { Lamb } from './lamb.js';
import type { Optimizer } from './optimizer.js';

export { GradientAccumulator } from './accumulate.js';
export { clipGradNorm, gradNorm } from './clip.js';
export { hfNoDecay } from './config.js';
export type { AdamWInit, DecayExclusion, LambInit, OptimizerConfig, OptimizerKind, ResolvedAdamWConfig, ResolvedLambConfig, ResolvedOptimizerConfig } from './config.js';
export type { Moments, Optimizer, OptimizerState } from './optimizer.js';
export { linearWarmupDecay, type LinearWarmupDecay } from './schedule.js';
export { decodeOptimizerState, encodeOptimizerState, encodeOptimizerStatePieces, OptimizerStateError } from './state.js';

/** An optimizer for parameters laid out as `params` (moments allocated now, zero). */
export function createOptimizer(params: ParameterSet, config: OptimizerConfig): Optimizer {
  const resolved = resolveOptimizerConfig(config);
  return resolved.kind === 'lamb' ? new Lamb(resolved, params) : new AdamW(resolved, params);
}
