import type { StepResult, TrainingBackend } from './backend.js';
import type { AlbertBatch } from './batch.js';
import { clipGradNorm, type Optimizer } from './optim/index.js';
import type { ParameterSet } from './params.js';

export interface LocalStep extends StepResult {
  /** Global gradient norm before clipping. */
  readonly gradNorm: number;
}

/**
 * One local training step: gradients from the backend, global-norm clipping, one optimizer update
 * of `params` in place at learning rate `lr`. `grads` is reused across steps (no allocation).
 */
export async function trainStep(backend: TrainingBackend, optimizer: Optimizer, params: ParameterSet, grads: ParameterSet, batch: AlbertBatch, lr: number, maxGradNorm = 1): Promise<LocalStep> {
  const result = await backend.forwardBackward(params, batch, grads);
  const gradNorm = clipGradNorm(grads, maxGradNorm);
  optimizer.step(params, grads, lr);
  return { ...result, gradNorm };
}
