import type { AlbertBatch } from './batch.js';
import type { ParameterSet } from './params.js';

/** What one forward + backward pass yields. Losses are HF's (total = MLM + SOP). */
export interface StepResult {
  readonly loss: number;
  readonly mlmLoss: number;
  readonly sopLoss: number;
  readonly mlmAccuracy: number;
  readonly sopAccuracy: number;
  /** ∂loss/∂param in the parameters' layout (the `grads` argument when one was given). */
  readonly grads: ParameterSet;
}

/**
 * The contract between the trainer/optimizer and whatever computes gradients. The ORT session
 * backend implements it today; a device-resident backend (weights kept on the GPU via IoBinding)
 * can replace it without touching the optimizer.
 */
export interface TrainingBackend {
  /** Human-readable description ("onnxruntime cpu, 2 threads"). */
  readonly description: string;
  /** Loss, metrics and every gradient for one batch. Writes into `grads` when given (no allocation). */
  forwardBackward(params: ParameterSet, batch: AlbertBatch, grads?: ParameterSet): Promise<StepResult>;
  close(): Promise<void>;
}
