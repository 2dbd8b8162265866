/**
 * How much memory a training process needs at its peak, so the volunteer's memory limit can be
 * honoured before anything is allocated (the micro-batch is shrunk to fit, or training refuses to
 * start) rather than by the operating system killing the app.
 *
 * Three parts:
 * - the trainer's parameter-sized float32 buffers, counted from the code (see TRAINER_BUFFERS);
 * - onnxruntime: the training graph's parameter-sized intermediates (gradient outputs, the shared
 *   layer's per-application gradients before they are summed, transposed weight copies) and the
 *   activations it keeps for the backward pass, which grow with the batch's tokens;
 * - a fixed baseline: Node, the engine's native libraries and ORT's session.
 *
 * The ORT coefficients are calibrated against measured peaks (test/fixtures/measure-training-memory.ts:
 * RSS after the imports vs the process's maximum RSS over real OrtBackend steps on the CPU, LAMB, one
 * thread, synthetic batches, then a checkpoint's encoding), on a 2-core x86-64 Linux machine, MB = 10⁶ B;
 * estimate = trainer 'local' without the baseline. These figures predate WorkerBackend (onnxruntime
 * inline); its thread and transfer buffers are added on top (WORKER_THREAD_BYTES, TRAINER_BUFFERS):
 *
 *   preset  B×S     measured   estimate   ratio
 *   tiny    1×128      49 MB      52 MB     1.06
 *   tiny    4×128      66 MB      69 MB     1.05
 *   tiny    16×128    131 MB     136 MB     1.04
 *   tiny    32×128    222 MB     225 MB     1.02
 *   tiny    8×64       61 MB      67 MB     1.09
 *   base    1×128     762 MB     804 MB     1.05
 *   base    4×128     994 MB    1034 MB     1.04
 *   base    4×64      842 MB     860 MB     1.02
 *   base    1×256     798 MB     922 MB     1.16
 *   base    1×512    1138 MB    1283 MB     1.13
 *
 * ORT's arena grows in chunks, so single points scatter by ±15 % around any smooth fit; fp16 measured
 * the same as fp32 for tiny at 16×128 (its float16 weight copies are small next to the activations).
 * The baseline (RSS of a Node process after importing the engine) measured 98–110 MB.
 */
import type { AlbertConfig } from './albert/config.js';
import type { Precision } from './albert/graph.js';
import { albertParamSpecs } from './albert/params.js';

/** The two training loops: solo training (alone) and the swarm peer (src/training/). */
export type TrainerKind = 'local' | 'swarm';

/**
 * Parameter-sized float32 buffers each trainer holds at its peak.
 * - local: params, grads, LAMB's m and v (4, for the whole run) + a checkpoint's encoding: the encoded
 *   weights (1), exportState's copies of m and v (2) and their encoding (2) = 9.
 * - swarm: params, grads, LAMB's m and v, the gradient accumulator's sum and the averaged gradient
 *   (CollaborativeOptimizer) (6) + the larger transient: the training state served to a joining peer,
 *   exportState's m and v (2) and the encoded params + moments (3), which outweighs the all-reduce's
 *   result vector (1) = 11. (averageOptStatistics, off in the app, would add a 3-parameter vector and
 *   an exportState copy of m and v at each state-averaging round.)
 * Both train through WorkerBackend, whose transfer buffers (the parameters sent to its worker, the
 * gradients that come back) add 2.
 */
const TRAINER_BUFFERS: Readonly<Record<TrainerKind, number>> = { local: 11, swarm: 13 };

/** Parameter-sized float32 tensors onnxruntime holds during a step (fitted on base, whose weights dominate). */
const ORT_WEIGHT_COPIES = 5.5;
/** fp16 adds float16 copies of the weights the matmuls read (half a float32 buffer). */
const FP16_WEIGHT_COPIES = 0.5;
/** Floats kept per token independent of the layer size (embeddings, MLM head, ORT bookkeeping; fitted on tiny). */
const FLOATS_PER_TOKEN = 7800;
/** Floats kept per token per layer application, per unit of (hidden + intermediate + heads·seqLen) (fitted on base). */
const ACTIVATION_FACTOR = 2.2;
/** ORT session and allocator overhead that does not scale with the model (fitted on tiny: the intercept). */
const ORT_FIXED_BYTES = 42e6;
/**
 * WorkerBackend's thread: its V8 isolate and its own copy of the engine's modules. Measured 49–50 MB
 * running from source under tsx (the fixture, tiny 1×16 and 16×64, against OrtBackend inline).
 */
const WORKER_THREAD_BYTES = 50e6;
/** RSS of the process before training allocates anything (Node, the engine's native libraries). */
const PROCESS_BASELINE_BYTES = 105e6;

export interface TrainingShape {
  /** Micro-batch size. */
  readonly batchSize: number;
  readonly seqLen: number;
  readonly precision: Precision;
  readonly trainer: TrainerKind;
  /** delay_optimizer_step (swarm): micro-batches read a compute copy of the parameters while the step updates the master (+1). */
  readonly delayOptimizerStep?: boolean;
}

export interface MemoryEstimate {
  /** The trainer's parameter-sized buffers. */
  readonly trainerBytes: number;
  /** onnxruntime: weight-sized intermediates, activations, session overhead, the worker thread it runs in. */
  readonly ortBytes: number;
  readonly baselineBytes: number;
  readonly totalBytes: number;
}

export function parameterCount(config: AlbertConfig): number {
  return albertParamSpecs(config).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
}

/** The estimated peak memory (bytes) of a process training `config` at `shape`. */
export function estimateTrainingMemory(config: AlbertConfig, shape: TrainingShape): MemoryEstimate {
  const paramBytes = 4 * parameterCount(config);
  const trainerBytes = (TRAINER_BUFFERS[shape.trainer] + (shape.delayOptimizerStep ? 1 : 0)) * paramBytes;
  const ortBytes = WORKER_THREAD_BYTES + ortSessionBytes(config, shape);
  return { trainerBytes, ortBytes, baselineBytes: PROCESS_BASELINE_BYTES, totalBytes: trainerBytes + ortBytes + PROCESS_BASELINE_BYTES };
}

/** onnxruntime's own part of a step: session overhead, weight-sized intermediates, activations. */
function ortSessionBytes(config: AlbertConfig, shape: Pick<TrainingShape, 'batchSize' | 'seqLen' | 'precision'>): number {
  const { batchSize: B, seqLen: S } = shape;
  if (!Number.isInteger(B) || B < 1) throw new RangeError(`memory estimate: batch size ${B} must be an integer ≥ 1`);
  if (!Number.isInteger(S) || S < 1) throw new RangeError(`memory estimate: sequence length ${S} must be an integer ≥ 1`);
  const perToken = FLOATS_PER_TOKEN + ACTIVATION_FACTOR * config.numHiddenLayers * (config.hiddenSize + config.intermediateSize + config.numAttentionHeads * S);
  const weightCopies = ORT_WEIGHT_COPIES + (shape.precision === 'fp16' ? FP16_WEIGHT_COPIES : 0);
  return ORT_FIXED_BYTES + weightCopies * 4 * parameterCount(config) + 4 * B * S * perToken;
}

/**
 * CUDA's context and the cuBLAS/cuDNN handles and workspaces onnxruntime's CUDA provider creates: a few
 * hundred MB on current drivers; not yet measured here (no GPU has been lent to the project).
 */
const CUDA_CONTEXT_BYTES = 600e6;

/**
 * What a training step holds on the GPU with onnxruntime's CUDA provider: its arena keeps the same
 * activations and weight-sized intermediates as on the CPU (the coefficients above), plus the device
 * copy of the parameters fed in each step (one float32 buffer; on the CPU they are views) and the CUDA
 * context. The trainer's buffers (optimizer state, accumulators) stay in host memory. Uncalibrated on
 * a GPU: the CPU fit is the best figure until one is measured (`npm run bench -- gpu` prints both).
 */
export function estimateGpuMemory(config: AlbertConfig, shape: Pick<TrainingShape, 'batchSize' | 'seqLen' | 'precision'>): number {
  return CUDA_CONTEXT_BYTES + 4 * parameterCount(config) + ortSessionBytes(config, shape);
}

export type MicroBatchPlan =
  | { readonly fits: true; readonly batchSize: number; readonly estimate: MemoryEstimate }
  /** Even one sample per micro-batch needs more than the limit; `estimate` is the one-sample estimate. */
  | { readonly fits: false; readonly estimate: MemoryEstimate; readonly reason: string };

/** The largest micro-batch ≤ `shape.batchSize` whose estimate fits in `limitBytes`. */
export function planMicroBatch(config: AlbertConfig, shape: TrainingShape, limitBytes: number): MicroBatchPlan {
  // the estimate is increasing in B: search down from the requested size (B is small; a linear scan is exact and cheap)
  for (let b = shape.batchSize; b >= 1; b--) {
    const estimate = estimateTrainingMemory(config, { ...shape, batchSize: b });
    if (estimate.totalBytes <= limitBytes) return { fits: true, batchSize: b, estimate };
  }
  const estimate = estimateTrainingMemory(config, { ...shape, batchSize: 1 });
  return { fits: false, estimate, reason: `needs about ${formatBytes(estimate.totalBytes)}; memory limit is ${formatBytes(limitBytes)} — raise it in Settings` };
}

/** "1.9 GiB" / "740 MiB": how the app shows memory sizes. */
export function formatBytes(bytes: number): string {
  const mib = bytes / 2 ** 20;
  return mib >= 1024 ? `${(mib / 1024).toFixed(1)} GiB` : `${Math.round(mib)} MiB`;
}
