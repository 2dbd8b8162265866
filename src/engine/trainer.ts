import type { StepResult, TrainingBackend } from './backend.js';
import type { AlbertBatch } from './batch.js';
import type { DynamicLossScaler } from './loss-scaler.js';
import { clipGradNorm, type Optimizer } from './optim/index.js';
import type { ParameterSet } from './params.js';

export interface LocalStep extends StepResult {
  /** Global gradient norm before clipping (NaN for a skipped step). */
  readonly gradNorm: number;
  /**
   * Why no update was made (the parameters and the optimizer are untouched): the fp16 loss scaler
   * found an overflow and backed off, or, with no scaler, the loss or a gradient was not finite.
   */
  readonly skipped: false | 'overflow' | 'non-finite';
}

/**
 * One local training step: gradients from the backend, global-norm clipping, one optimizer update
 * of `params` in place at learning rate `lr`. `grads` is reused across steps (no allocation).
 * With a loss scaler (fp16), gradients are computed at its scale and a step with inf/NaN gradients
 * is skipped (the scaler backs off); without one, a non-finite loss or gradient skips the step too
 * (one bad batch must not end training, nor poison the parameters).
 */
export async function trainStep(backend: TrainingBackend, optimizer: Optimizer, params: ParameterSet, grads: ParameterSet, batch: AlbertBatch, lr: number, maxGradNorm = 1, scaler?: DynamicLossScaler): Promise<LocalStep> {
  const result = await scaledGradients(backend, params, batch, grads, scaler);
  if (result.skipped) return { ...result, gradNorm: Number.NaN, skipped: 'overflow' };
  if (!scaler && !(result.gradsFinite && Number.isFinite(result.loss))) return { ...result, gradNorm: Number.NaN, skipped: 'non-finite' };
  const gradNorm = clipGradNorm(grads, maxGradNorm);
  optimizer.step(params, grads, lr);
  return { ...result, gradNorm, skipped: false };
}

/**
 * Forward + backward at the scaler's loss scale (if any): `skipped` when the gradients overflowed,
 * after the scaler has backed off; such gradients must not be used (the collaborative peer drops
 * the micro-batch, trainStep skips the update).
 */
export async function scaledGradients(backend: TrainingBackend, params: ParameterSet, batch: AlbertBatch, grads: ParameterSet, scaler?: DynamicLossScaler): Promise<StepResult & { readonly skipped: boolean }> {
  const result = await backend.forwardBackward(params, batch, grads, scaler ? { lossScale: scaler.scale } : {});
  return { ...result, skipped: scaler ? !scaler.update(result.gradsFinite) : false };
}
