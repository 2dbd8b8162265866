import type { Worker } from 'node:worker_threads';
import type { Precision } from './albert/graph.js';
import type { AlbertConfig } from './albert/config.js';
import type { PassOptions, StepResult, TrainingBackend } from './backend.js';
import type { AlbertBatch } from './batch.js';
import { ortDescription, type OrtBackendOptions } from './ort-backend.js';
import { checkProviderPrecision } from './providers.js';
import type { FromWorker, OrtWorkerData, RunRequest, ToWorker } from './ort-worker-protocol.js';
import type { ParameterSet } from './params.js';
import { siblingEntry, startWorker } from '../util/worker-thread.js';

export interface WorkerBackendOptions extends OrtBackendOptions {
  /** The worker's entry module (default: ort-worker next to this module); tests point it at fixtures. */
  readonly workerEntry?: URL;
}

/** How long close() lets the worker release its sessions (a run in flight finishes first) before terminating it. */
const CLOSE_GRACE_MS = 15_000;

interface Buffers {
  readonly params: Float32Array;
  readonly grads: Float32Array;
}

interface Pending {
  readonly grads: ParameterSet;
  readonly resolve: (r: StepResult) => void;
  readonly reject: (err: Error) => void;
}

/**
 * OrtBackend in a worker thread: onnxruntime-node's `session.run` is synchronous on the thread that
 * calls it, so run inline it freezes the event loop (libp2p, the averaging protocol, the dashboard)
 * for a whole micro-batch. Here the JS thread only copies the parameters into a buffer of its own
 * and transfers it to the worker (onnxruntime rejects tensors over a SharedArrayBuffer), then copies
 * the gradients that come back into `grads`. The parameters are read only while forwardBackward is
 * being called, so the caller may change them as soon as it has the promise. The worker starts at
 * the first call; close() ends it. If it dies, every pending and later call rejects with the cause.
 */
export class WorkerBackend implements TrainingBackend {
  private worker: Worker | undefined;
  /** Why calls fail: the worker died, or the backend was closed. */
  private failure: Error | undefined;
  private readonly pending = new Map<number, Pending>();
  /** Transfer buffers not in flight (one pair unless calls overlap). */
  private free: Buffers[] = [];
  private nextId = 0;
  private ortDescription: string;

  constructor(
    readonly config: AlbertConfig,
    private readonly options: WorkerBackendOptions = {},
  ) {
    checkProviderPrecision(options);
    this.ortDescription = ortDescription(options.provider ?? 'auto', options);
  }

  get precision(): Precision {
    return this.options.precision ?? 'fp32';
  }

  get description(): string {
    return `${this.ortDescription} (worker thread)`;
  }

  // async, yet the parameters are copied before the first await: synchronously, during the call
  async forwardBackward(params: ParameterSet, batch: AlbertBatch, grads: ParameterSet = params.zerosLike(), { lossScale = 1 }: PassOptions = {}): Promise<StepResult> {
    if (this.failure) throw new Error(`forwardBackward: ${this.failure.message}`, { cause: this.failure });
    if (!grads.sameLayout(params)) throw new Error('forwardBackward: grads do not have the parameters\' layout');
    const worker = this.start();
    const buffers = this.take(params.size);
    buffers.params.set(params.data);
    const id = this.nextId++;
    const request: RunRequest = { type: 'run', id, specs: params.specs, params: buffers.params, grads: buffers.grads, batch: ownBuffers(batch), lossScale };
    try {
      worker.postMessage(request satisfies ToWorker, [buffers.params.buffer as ArrayBuffer, buffers.grads.buffer as ArrayBuffer]);
    } catch (err) {
      throw new Error(`forwardBackward: the batch cannot be sent to the onnxruntime worker: ${(err as Error).message}`, { cause: err });
    }
    if (this.pending.size === 0) worker.ref(); // a call in flight keeps the process alive
    return new Promise((resolve, reject) => this.pending.set(id, { grads, resolve, reject }));
  }

  async close(): Promise<void> {
    this.fail(new Error('the backend is closed'));
    const worker = this.worker;
    if (!worker) return;
    this.worker = undefined;
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.ref();
    worker.postMessage({ type: 'close' } satisfies ToWorker);
    const timer = setTimeout(() => void worker.terminate(), CLOSE_GRACE_MS);
    await exited;
    clearTimeout(timer);
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const { log: _log, workerEntry, ...ortOptions } = this.options;
    const workerData: OrtWorkerData = { config: this.config, options: ortOptions };
    const worker = startWorker(workerEntry ?? siblingEntry(import.meta.url, 'ort-worker'), { workerData });
    worker.unref(); // idle: no reason to keep the process alive
    worker.on('message', (m: FromWorker) => this.receive(m));
    worker.on('error', (err) => this.died(worker, new Error(`the onnxruntime worker failed: ${err.message}`, { cause: err })));
    worker.on('messageerror', (err) => this.died(worker, new Error(`the onnxruntime worker sent a message that cannot be read: ${err.message}`, { cause: err })));
    worker.on('exit', (code) => this.died(worker, new Error(`the onnxruntime worker exited (code ${code})`)));
    this.worker = worker;
    return worker;
  }

  private receive(m: FromWorker): void {
    if (m.type === 'log') {
      this.options.log?.[m.level](m.obj ?? {}, m.msg);
      return;
    }
    this.free.push({ params: m.params, grads: m.grads });
    const call = this.pending.get(m.id);
    if (!call) return; // rejected meanwhile (close)
    this.pending.delete(m.id);
    if (this.pending.size === 0) this.worker?.unref();
    if (m.type === 'failed') return call.reject(new Error(m.message));
    this.ortDescription = m.description;
    call.grads.data.set(m.grads);
    const { loss, mlmLoss, sopLoss, mlmAccuracy, sopAccuracy, gradsFinite } = m;
    call.resolve({ loss, mlmLoss, sopLoss, mlmAccuracy, sopAccuracy, gradsFinite, grads: call.grads });
  }

  /** The worker ended without being closed: this backend is unusable, and nothing may wait for it. */
  private died(worker: Worker, err: Error): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    this.fail(err);
  }

  private fail(err: Error): void {
    this.failure ??= err;
    const calls = [...this.pending.values()];
    this.pending.clear();
    for (const call of calls) call.reject(new Error(`forwardBackward: ${this.failure.message}`, { cause: this.failure }));
  }

  /** A pair of transfer buffers of `size` elements: a free one, or new (the layout changed, or calls overlap). */
  private take(size: number): Buffers {
    this.free = this.free.filter((b) => b.params.length === size);
    return this.free.pop() ?? { params: new Float32Array(size), grads: new Float32Array(size) };
  }
}

/** The batch with arrays that own their buffers: posting a view would copy its whole underlying buffer. */
function ownBuffers(batch: AlbertBatch): AlbertBatch {
  const own = (a: Int32Array): Int32Array => (ArrayBuffer.isView(a) && a.byteLength !== a.buffer.byteLength ? a.slice() : a);
  return {
    batchSize: batch.batchSize,
    seqLen: batch.seqLen,
    inputIds: own(batch.inputIds),
    tokenTypeIds: own(batch.tokenTypeIds),
    attentionMask: own(batch.attentionMask),
    labels: own(batch.labels),
    sentenceOrderLabel: own(batch.sentenceOrderLabel),
  };
}
