import type { Precision } from './albert/graph.js';
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
  /** False when some gradient is inf or NaN (under fp16 loss scaling: an overflow, skip the step). */
  readonly gradsFinite: boolean;
}

export interface PassOptions {
  /**
   * fp16 only: the backward pass is seeded with loss × lossScale (so small gradients survive in
   * float16) and the returned gradients are divided by it again. Default 1.
   */
  readonly lossScale?: number;
}

/**
 * The contract between the trainer/optimizer and whatever computes gradients. The ORT session
 * backend implements it today; a device-resident backend (weights kept on the GPU via IoBinding)
 * can replace it without touching the optimizer.
 */
export interface TrainingBackend {
  /** Human-readable description ("onnxruntime cpu, 2 threads"). */
  readonly description: string;
  /** fp32, or fp16 mixed precision (then use a loss scale: see DynamicLossScaler). */
  readonly precision: Precision;
  /**
   * Loss, metrics and every gradient for one batch. Writes into `grads` when given (no allocation).
   * `params` must not change until the promise settles (OrtBackend reads them during the run),
   * except with WorkerBackend, which copies them during the call itself.
   */
  forwardBackward(params: ParameterSet, batch: AlbertBatch, grads?: ParameterSet, options?: PassOptions): Promise<StepResult>;
  close(): Promise<void>;
}
