import * as ort from 'onnxruntime-node';
import type { Logger } from '../log/logger.js';
import { buildAlbertGraph, gradOutput, BATCH_INPUTS, LOSS_SCALE_INPUT, type Precision } from './albert/graph.js';
import type { AlbertConfig } from './albert/config.js';
import { labelledPositions, mlmCapacity, type MlmPositions } from './albert/mlm-positions.js';
import { checkBatch, type AlbertBatch } from './batch.js';
import type { PassOptions, StepResult, TrainingBackend } from './backend.js';
import { missingCudaProvider } from './cuda-install.js';
import { encodeModel } from './onnx/encode.js';
import { checkProviderPrecision, type ProviderChoice } from './providers.js';
import type { ParameterSet } from './params.js';

export interface OrtBackendOptions {
  /**
   * 'auto' tries CUDA and falls back to CPU, logging why (default 'auto'). 'webgpu' runs on a GPU
   * whose driver offers Vulkan (Linux; D3D12 and Metal elsewhere, not checked) through the WebGPU
   * provider that onnxruntime-node ships, fp32 only (its fp16 weight gradients are wrong:
   * docs/engine.md, "WebGPU provider"); asked for by name only, since the adapter it finds may be a
   * software one (Mesa's lavapipe) slower than the CPU provider.
   */
  readonly provider?: ProviderChoice;
  /** ORT intra-op threads (default: ORT's choice, one per core). */
  readonly intraOpThreads?: number;
  readonly log?: Pick<Logger, 'info' | 'warn'>;
  /** fp32 (default) or fp16 mixed precision (float16 matmuls, float32 master weights and gradients). */
  readonly precision?: Precision;
  /** The data's masking rate, which sizes the MLM head's K positions (default 0.15, the data pipeline's). */
  readonly mlmProbability?: number;
  /** Writes onnxruntime's per-node profile (JSON, one file per session, on close) under this path prefix. */
  readonly profileFilePrefix?: string;
}

/** "onnxruntime cpu, 2 threads, fp16": the provider in use (the choice before the first session) and the options. */
export function ortDescription(provider: string, options: OrtBackendOptions): string {
  return `onnxruntime ${provider}${options.intraOpThreads ? `, ${options.intraOpThreads} threads` : ''}${options.precision === 'fp16' ? ', fp16' : ''}`;
}

/**
 * Runs the ALBERT training graph in onnxruntime-node: one InferenceSession per (batch, seq) shape,
 * built on first use and cached. Parameters are fed as views of the flat buffer (no copy on CPU);
 * gradients are copied into the caller's ParameterSet. With fp16 the graph is seeded with the loss
 * scale and the gradients are unscaled here, in the same pass that checks them for inf/NaN. The MLM
 * head runs only at the labelled positions, gathered here into K = mlmCapacity(B, S) slots; a batch
 * with more labelled positions than K (never dropped) runs the full-positions graph of its shape
 * instead, built when first needed.
 */
export class OrtBackend implements TrainingBackend {
  private readonly sessions = new Map<string, Promise<ort.InferenceSession>>();
  private provider: Exclude<ProviderChoice, 'auto'> | undefined;

  constructor(
    readonly config: AlbertConfig,
    private readonly options: OrtBackendOptions = {},
  ) {
    checkProviderPrecision(options);
  }

  get precision(): Precision {
    return this.options.precision ?? 'fp32';
  }

  get description(): string {
    return ortDescription(this.provider ?? this.options.provider ?? 'auto', this.options);
  }

  async forwardBackward(params: ParameterSet, batch: AlbertBatch, grads: ParameterSet = params.zerosLike(), { lossScale = 1 }: PassOptions = {}): Promise<StepResult> {
    if (!grads.sameLayout(params)) throw new Error('forwardBackward: grads do not have the parameters\' layout');
    if (!(lossScale > 0 && Number.isFinite(lossScale))) throw new Error(`forwardBackward: loss scale ${lossScale} is not a finite number > 0`);
    if (lossScale !== 1 && this.precision !== 'fp16') throw new Error(`forwardBackward: loss scale ${lossScale} needs precision fp16 (this backend is ${this.precision})`);
    checkBatch(batch, this.config.vocabSize);
    const [B, S] = [batch.batchSize, batch.seqLen];
    const positions = this.mlmPositions(batch);
    const session = await this.session(B, S, positions ? positions.labels.length : undefined);
    const feeds: Record<string, ort.Tensor> = {};
    for (const spec of params.specs) feeds[spec.name] = new ort.Tensor('float32', params.view(spec.name), [...spec.shape]);
    const batchData = { input_ids: batch.inputIds, token_type_ids: batch.tokenTypeIds, attention_mask: batch.attentionMask, sentence_order_label: batch.sentenceOrderLabel };
    for (const name of BATCH_INPUTS) feeds[name] = new ort.Tensor('int32', batchData[name], name === 'sentence_order_label' ? [B] : [B, S]);
    if (this.precision === 'fp16') feeds[LOSS_SCALE_INPUT] = new ort.Tensor('float32', Float32Array.of(lossScale), []);
    if (positions) {
      feeds.mlm_positions = new ort.Tensor('int64', positions.positions, [positions.positions.length]);
      feeds.mlm_labels = new ort.Tensor('int32', positions.labels, [positions.labels.length]);
    } else feeds.labels = new ort.Tensor('int32', batch.labels, [B, S]);
    const out = await session.run(feeds);
    const scalar = (name: string) => (out[name]!.data as Float32Array)[0]!;
    for (const spec of params.specs) grads.view(spec.name).set(out[gradOutput(spec.name)]!.data as Float32Array);
    const gradsFinite = unscale(grads.data, lossScale);
    const result = { loss: scalar('loss'), mlmLoss: scalar('mlm_loss'), sopLoss: scalar('sop_loss'), mlmAccuracy: scalar('mlm_accuracy'), sopAccuracy: scalar('sop_accuracy'), grads, gradsFinite };
    for (const t of Object.values(out)) t.dispose();
    return result;
  }

  async close(): Promise<void> {
    const sessions = [...this.sessions.values()];
    this.sessions.clear();
    for (const s of sessions) {
      const session = await s;
      if (this.options.profileFilePrefix) session.endProfiling();
      await session.release();
    }
  }

  /**
   * The batch's labelled positions in K slots, or undefined for the full-positions graph: when K
   * would cover every position anyway, or (warned once per shape) when the batch has more than K.
   */
  private mlmPositions(batch: AlbertBatch): MlmPositions | undefined {
    const [B, S] = [batch.batchSize, batch.seqLen];
    const capacity = mlmCapacity(B, S, this.options.mlmProbability);
    if (capacity === B * S) return undefined;
    const picked = labelledPositions(batch.labels, capacity);
    if ('positions' in picked) return picked;
    if (!this.sessions.has(`${B}x${S}`)) {
      this.options.log?.warn(
        { labelled: picked.overflow, capacity, batchSize: B, seqLen: S },
        `batch has ${picked.overflow} labelled positions, more than the ${capacity} the MLM head of a ${B}×${S} graph holds; using the full-positions graph for such batches (slower)`,
      );
    }
    return undefined;
  }

  /** The session for a shape; `mlmPositions` K selects the gathered-head graph, undefined the full one. */
  private session(batchSize: number, seqLen: number, mlmPositions: number | undefined): Promise<ort.InferenceSession> {
    const key = mlmPositions === undefined ? `${batchSize}x${seqLen}` : `${batchSize}x${seqLen}_k${mlmPositions}`;
    let session = this.sessions.get(key);
    if (!session) {
      // WebGPU's ScatterND loses additions that land on one embedding row at once
      const embeddingGradient = this.options.provider === 'webgpu' ? 'matmul' : 'scatter';
      session = this.createSession(encodeModel(buildAlbertGraph(this.config, { batchSize, seqLen, precision: this.precision, mlmPositions, embeddingGradient }), `albert_${key}`));
      session.catch(() => this.sessions.delete(key));
      this.sessions.set(key, session);
    }
    return session;
  }

  private async createSession(model: Uint8Array): Promise<ort.InferenceSession> {
    const base: ort.InferenceSession.SessionOptions = {
      graphOptimizationLevel: 'all',
      executionMode: 'sequential',
      ...(this.options.intraOpThreads ? { intraOpNumThreads: this.options.intraOpThreads } : {}),
      ...(this.options.profileFilePrefix ? { enableProfiling: true, profileFilePrefix: this.options.profileFilePrefix } : {}),
    };
    const choice = this.options.provider ?? 'auto';
    if (choice === 'webgpu') return this.webgpuSession(model, base);
    if (choice !== 'cpu' && this.provider !== 'cpu') {
      const cuda = await this.cudaSession(model, base);
      if ('session' in cuda) {
        this.provider = 'cuda';
        return cuda.session;
      }
      if (choice === 'cuda') throw new Error(`CUDA execution provider failed to load: ${cuda.reason}`, { cause: cuda.cause });
      this.options.log?.warn({ reason: cuda.reason }, 'CUDA execution provider unavailable; training on CPU');
    }
    this.provider = 'cpu';
    this.options.log?.info({ intraOpThreads: this.options.intraOpThreads ?? 'default' }, 'onnxruntime session on CPU');
    return ort.InferenceSession.create(model, { ...base, executionProviders: ['cpu'] });
  }

  /**
   * A WebGPU session. Unlike CUDA's, nodes without a WebGPU kernel (LogSoftmax; small integer shape
   * ops) run on the CPU provider: the graph's tensors cross to the CPU around them, which costs a
   * copy, not correctness (test/engine/webgpu.test.ts compares loss and gradients with the CPU's).
   */
  private async webgpuSession(model: Uint8Array, base: ort.InferenceSession.SessionOptions): Promise<ort.InferenceSession> {
    try {
      const session = await ort.InferenceSession.create(model, { ...base, executionProviders: ['webgpu'], logSeverityLevel: 4 });
      if (this.provider !== 'webgpu') this.options.log?.info({ intraOpThreads: this.options.intraOpThreads ?? 'default' }, 'onnxruntime session on WebGPU');
      this.provider = 'webgpu';
      return session;
    } catch (err) {
      throw new Error(`WebGPU execution provider failed to load: ${(err as Error).message.split('\n')[0]!}`, { cause: err });
    }
  }

  /** A CUDA session, or why there is none: the provider's files are not installed, or ORT could not load it. */
  private async cudaSession(model: Uint8Array, base: ort.InferenceSession.SessionOptions): Promise<{ session: ort.InferenceSession } | { reason: string; cause?: unknown }> {
    const missing = missingCudaProvider();
    if (missing !== undefined) return { reason: missing };
    try {
      return { session: await ort.InferenceSession.create(model, { ...cudaSessionOptions(base), logSeverityLevel: 4 }) }; // failure reported by the caller
    } catch (err) {
      return { reason: (err as Error).message.split('\n')[0]!, cause: err };
    }
  }
}

/**
 * A CUDA session's options: CPU fallback disabled, so a node without a CUDA kernel fails the session
 * ("…assigned to the default CPU EP, but fallback to CPU EP has been explicitly disabled…") instead of
 * running on the CPU with device copies around it every step; 'auto' then trains on the CPU provider,
 * logging that reason. test/engine/cuda-coverage.test.ts proves the graphs need no fallback.
 */
export function cudaSessionOptions(base: ort.InferenceSession.SessionOptions): ort.InferenceSession.SessionOptions {
  return { ...base, executionProviders: ['cuda'], extra: { session: { disable_cpu_ep_fallback: '1' } } };
}

/** Divides every gradient by `scale` (exact at 1 and at powers of 2) and reports whether all are finite, in one pass. */
function unscale(data: Float32Array, scale: number): boolean {
  const inv = 1 / scale;
  let finite = true;
  for (let i = 0; i < data.length; i++) {
    const v = data[i]! * inv;
    data[i] = v;
    // v − v is NaN for ±Inf and NaN, 0 otherwise
    if (v - v !== 0) finite = false;
  }
  return finite;
}
