/** Messages between WorkerBackend (the JS thread) and its onnxruntime worker (ort-worker.ts). */
import type { AlbertConfig } from './albert/config.js';
import type { AlbertBatch } from './batch.js';
import type { OrtBackendOptions } from './ort-backend.js';
import type { ParamSpec } from './params.js';

/** The worker's `workerData`: what it builds its OrtBackend from (the logger stays on the JS thread). */
export interface OrtWorkerData {
  readonly config: AlbertConfig;
  readonly options: Omit<OrtBackendOptions, 'log'>;
}

/**
 * One forward + backward pass. `params` and `grads` are buffers owned by the backend, transferred
 * (not copied) to the worker and back: `params` holds a copy of the caller's parameters, `grads`
 * receives the gradients.
 */
export interface RunRequest {
  readonly type: 'run';
  readonly id: number;
  readonly specs: readonly ParamSpec[];
  readonly params: Float32Array;
  readonly grads: Float32Array;
  readonly batch: AlbertBatch;
  readonly lossScale: number;
}

export type ToWorker = RunRequest | { readonly type: 'close' };

export interface RunResult {
  readonly type: 'result';
  readonly id: number;
  readonly params: Float32Array;
  readonly grads: Float32Array;
  readonly loss: number;
  readonly mlmLoss: number;
  readonly sopLoss: number;
  readonly mlmAccuracy: number;
  readonly sopAccuracy: number;
  readonly gradsFinite: boolean;
  /** OrtBackend's description after the run (the provider it settled on). */
  readonly description: string;
}

/** A pass that threw; the buffers come back so the backend can reuse them. */
export interface RunFailure {
  readonly type: 'failed';
  readonly id: number;
  readonly params: Float32Array;
  readonly grads: Float32Array;
  readonly message: string;
}

/** A line OrtBackend logged (provider choice, CUDA fallback reason, full-positions graph warning). */
export interface LogLine {
  readonly type: 'log';
  readonly level: 'info' | 'warn';
  readonly obj: unknown;
  readonly msg: string | undefined;
}

export type FromWorker = RunResult | RunFailure | LogLine;
