import { gradients } from '../autodiff.js';
import { IGNORE_INDEX } from '../batch.js';
import { geluNew } from '../fused.js';
import { Graph, int32Tensor, int64Tensor, floatTensor, type FloatType, type Value } from '../onnx/graph.js';
import { albertParamSpecs, LAYER } from './params.js';
import type { AlbertConfig } from './config.js';

/** Names of the scalar outputs of a training graph, in HF's terms. */
export const METRIC_OUTPUTS = ['loss', 'mlm_loss', 'sop_loss', 'mlm_accuracy', 'sop_accuracy'] as const;
export type MetricName = (typeof METRIC_OUTPUTS)[number];
/** The graph output holding ∂loss/∂param. */
export const gradOutput = (param: string) => `grad:${param}`;

/**
 * Batch inputs every graph has (int32 [B, S], sentence_order_label [B]); the MLM targets come as
 * `labels` int32 [B, S] (full-positions graph) or as `mlm_positions` int64 [K] + `mlm_labels` int32 [K].
 */
export const BATCH_INPUTS = ['input_ids', 'token_type_ids', 'attention_mask', 'sentence_order_label'] as const;

/** fp32: everything in float32. fp16: mixed precision (see `buildAlbertGraph`). */
export type Precision = 'fp32' | 'fp16';
export const PRECISIONS: readonly Precision[] = ['fp32', 'fp16'];
/** The float32 scalar input of an fp16 graph that seeds the backward pass (dynamic loss scaling). */
export const LOSS_SCALE_INPUT = 'loss_scale';

/** torch.finfo(float32).min: HF's additive attention mask value. */
const MASK_MIN = -3.4028234663852886e38;

export interface AlbertGraphOptions {
  readonly batchSize: number;
  readonly seqLen: number;
  /** float64 for gradient checks; float32 (default) for training. */
  readonly float?: FloatType;
  /** fp32 (default) or fp16 mixed precision; fp16 requires float32 (the master type). */
  readonly precision?: Precision;
  /**
   * K: run the MLM head only on K gathered rows (inputs `mlm_positions`, `mlm_labels`; see
   * mlm-positions.ts) instead of all B·S (input `labels`). Same loss and gradients; at B·S rows the head's
   * decoder onto the vocabulary is the largest single Gemm of the step.
   */
  readonly mlmPositions?: number;
  /** With mlmPositions: run the last layer on the rows the heads read only (default: `prunesLastLayer`). */
  readonly pruneLastLayer?: boolean;
  /**
   * How the embedding tables' gradients are summed: `scatter` (default), Gather's VJP, a ScatterND
   * that adds each row's gradient into its table row; `matmul`, onehot(ids)ᵀ · d, for a provider whose
   * scatter-add loses additions that land on one row at once (WebGPU on an H200: the tables' gradients
   * were 45–94 % off at 32 × 128 tokens). It costs an [N, vocab] one-hot and one Gemm.
   */
  readonly embeddingGradient?: EmbeddingGradient;
}

export type EmbeddingGradient = 'scatter' | 'matmul';

/**
 * AlbertForPreTraining as an ONNX graph for one (batch, seq) shape: parameters are graph inputs
 * (named as in HF's state dict), so one session serves every step; outputs are the five metrics and
 * `grad:<name>` per parameter. Activations are kept 2-D [N = B·S, width] so every
 * Linear is one Gemm with torch's [out, in] weight (transB).
 *
 * precision fp16 (as torch.cuda.amp's autocast): parameters stay float32 graph inputs (master
 * weights) and are cast to float16 once each for the matmul-heavy parts (attention and FFN
 * projections, the embedding projection, the MLM decoder, the attention MatMuls); the embeddings,
 * the additive mask (−3.4e38 is not a float16), softmax, GELU, LayerNorm, the SOP head and the
 * losses stay float32. Cast's VJP casts gradients back, so `grad:<name>` are float32. The backward
 * pass is seeded with the `loss_scale` input, so every gradient output is scaled by it (the runner
 * unscales them and checks them for overflow).
 */
export function buildAlbertGraph(c: AlbertConfig, options: AlbertGraphOptions): Graph {
  const { batchSize: B, seqLen: S, float = 'float32', precision = 'fp32', mlmPositions: K, embeddingGradient = 'scatter' } = options;
  const pruneLastLayer = K !== undefined && (options.pruneLastLayer ?? prunesLastLayer(B, S, K));
  if (S > c.maxPositionEmbeddings) throw new Error(`albert: seq_len ${S} exceeds max_position_embeddings ${c.maxPositionEmbeddings}`);
  if (precision === 'fp16' && float !== 'float32') throw new Error(`albert: precision fp16 needs float32 master weights, not ${float}`);
  if (K !== undefined && !(Number.isInteger(K) && K >= 1 && K <= B * S)) throw new Error(`albert: mlmPositions ${K} must be an integer in [1, ${B * S}]`);
  const g = new Graph(float);
  const N = B * S;
  const { hiddenSize: H, numAttentionHeads: nh } = c;
  const d = H / nh;
  const specs = albertParamSpecs(c);
  const p = new Map(specs.map((s) => [s.name, g.input(s.name, s.shape)]));
  const P = (name: string) => p.get(name)!;
  const linear = (x: Value, name: string) => g.gemm(x, P(`${name}.weight`), P(`${name}.bias`), false, true);
  const layerNorm = (x: Value, name: string) => g.layerNorm(x, P(`${name}.weight`), P(`${name}.bias`), c.layerNormEps).y;
  // the compute type of the matmul-heavy parts; with fp32 these helpers add no node
  const half = precision === 'fp16';
  const halfParams = new Map<string, Value>();
  /** A parameter in the compute type (cast once, however many layer applications use it). */
  const W = (name: string) => {
    if (!half) return P(name);
    let w = halfParams.get(name);
    if (!w) halfParams.set(name, (w = g.cast(P(name), 'float16')));
    return w;
  };
  const toCompute = (x: Value) => (half && x.dtype !== 'float16' ? g.cast(x, 'float16') : x);
  const toFloat = (x: Value) => (x.dtype === float ? x : g.cast(x, float));
  /** A Linear in the compute type (its output stays there). */
  const dense = (x: Value, name: string) => g.gemm(toCompute(x), W(`${name}.weight`), W(`${name}.bias`), false, true);
  const lossScale = half ? g.input(LOSS_SCALE_INPUT, []) : undefined;

  const inputIds = g.reshape(g.input('input_ids', [B, S], 'int32'), [N]); // (N)
  const tokenTypes = g.reshape(g.input('token_type_ids', [B, S], 'int32'), [N]); // (N)
  const attentionMask = g.input('attention_mask', [B, S], 'int32'); // (B, S)
  const sopLabels = g.input('sentence_order_label', [B], 'int32'); // (B)

  // embeddings: word + position + token type, LayerNorm, then E → H
  const positionIds = g.constant(int32Tensor([N], Array.from({ length: N }, (_, i) => i % S))); // (N)
  const lookup = (table: Value, ids: Value) => embeddingLookup(g, table, ids, embeddingGradient);
  const words = wordLookup(g, lookup(P('albert.embeddings.word_embeddings.weight'), inputIds), inputIds, c.padTokenId); // (N, E)
  const positions = lookup(P('albert.embeddings.position_embeddings.weight'), positionIds); // (N, E)
  const types = lookup(P('albert.embeddings.token_type_embeddings.weight'), tokenTypes); // (N, E)
  const embeddings = g.add(g.add(words, positions), types);
  let h = toFloat(dense(layerNorm(embeddings, 'albert.embeddings.LayerNorm'), 'albert.encoder.embedding_hidden_mapping_in')); // (N, H)

  // additive mask (1 − mask)·min, broadcast over heads and query positions: (B, 1, 1, S)
  const maskF = g.reshape(g.cast(attentionMask, float), [B, 1, 1, S]);
  const additiveMask = g.mul(g.sub(g.scalar(1), maskF), g.scalar(MASK_MIN));
  const scale = g.scalar(1 / Math.sqrt(d));

  /**
   * One application of the shared layer to h (N, H). With `queries` (int64 [M] rows of h, and their
   * additive mask over all N keys, (1, 1, M, N)) only those rows are computed past the keys and
   * values: (M, H) out. Otherwise the B sequences attend within themselves: (N, H) out.
   */
  const encoderLayer = (h: Value, queries?: { rows: Value; mask: Value }): Value => {
    const groups = queries ? 1 : B;
    const heads = (x: Value, perm: number[]) => g.transpose(g.reshape(x, [groups, x.shape[0]! / groups, nh, d]), perm);
    const hq = queries ? g.gather(h, queries.rows) : h; // (M|N, H)
    const hc = toCompute(h);
    const q = heads(dense(toCompute(hq), `${LAYER}attention.query`), [0, 2, 1, 3]); // (groups, nh, M|S, d)
    const kT = heads(dense(hc, `${LAYER}attention.key`), [0, 2, 3, 1]); // (groups, nh, d, N|S)
    const v = heads(dense(hc, `${LAYER}attention.value`), [0, 2, 1, 3]); // (groups, nh, N|S, d)
    const probs = g.softmax(g.add(g.mul(toFloat(g.matmul(q, kT)), scale), queries ? queries.mask : additiveMask));
    const context = g.reshape(g.transpose(g.matmul(toCompute(probs), v), [0, 2, 1, 3]), [hq.shape[0]!, H]); // (M|N, H)
    const attended = layerNorm(g.add(hq, toFloat(dense(context, `${LAYER}attention.dense`))), `${LAYER}attention.LayerNorm`);
    const ffn = toFloat(dense(geluNew(g, toFloat(dense(attended, `${LAYER}ffn`))), `${LAYER}ffn_output`));
    return layerNorm(g.add(ffn, attended), `${LAYER}full_layer_layer_norm`);
  };
  for (let layer = 0; layer < c.numHiddenLayers - 1; layer++) h = encoderLayer(h);

  // The heads read the last layer's output at the first token of each sequence (SOP) and at the MLM
  // positions only. With the MLM positions gathered, the last layer computes queries, attention output
  // and FFN for those B + K rows alone (its keys and values still cover every position): the same
  // loss and gradients, about 5 % fewer FLOPs per step at B=8, S=128 (every other layer's output
  // feeds the next layer's keys and values at every position).
  const mlmRows = K === undefined ? undefined : g.input('mlm_positions', [K], 'int64');
  const labels = K === undefined ? g.reshape(g.input('labels', [B, S], 'int32'), [N]) : g.input('mlm_labels', [K], 'int32'); // (N|K)
  let first: Value; // (B, H)
  let rows: Value; // (N|K, H)
  if (mlmRows && K !== undefined && pruneLastLayer) {
    const queryRows = g.concat([g.constant(int64Tensor([B], Array.from({ length: B }, (_, b) => b * S))), mlmRows], 0); // (M = B + K)
    h = encoderLayer(h, { rows: queryRows, mask: crossSequenceMask(g, queryRows, additiveMask, B, S) });
    [first, rows] = [g.slice(h, [0], [B], [0]), g.slice(h, [B], [B + K], [0])];
  } else {
    h = encoderLayer(h);
    [first, rows] = [g.slice(g.reshape(h, [B, S * H]), [0], [H], [1]), mlmRows ? g.gather(h, mlmRows) : h];
  }

  // MLM head (dense H → E, gelu_new, LayerNorm, decoder tied to the word embeddings) on every row,
  // or on the K gathered rows; Gather's VJP scatter-adds the head's gradient back into (N, H)
  const t = layerNorm(geluNew(g, toFloat(dense(rows, 'predictions.dense'))), 'predictions.LayerNorm'); // (N|K, E)
  const mlmLogits = toFloat(g.gemm(toCompute(t), W('albert.embeddings.word_embeddings.weight'), W('predictions.bias'), false, true)); // (N|K, V)
  const mlm = crossEntropy(g, mlmLogits, labels);

  // SOP head on the pooled first token: tanh(pooler(h[:, 0]))
  const sopLogits = linear(g.tanh(linear(first, 'albert.pooler')), 'sop_classifier.classifier'); // (B, 2)
  const sop = crossEntropy(g, sopLogits, sopLabels);

  const loss = g.add(mlm.loss, sop.loss);
  const metrics: Record<MetricName, Value> = { loss, mlm_loss: mlm.loss, sop_loss: sop.loss, mlm_accuracy: mlm.accuracy, sop_accuracy: sop.accuracy };
  const grads = gradients(g, lossScale ? g.mul(loss, lossScale) : loss, [...p.values()]);
  for (const name of METRIC_OUTPUTS) g.output(metrics[name], name);
  for (const s of specs) g.output(grads.get(s.name)!, gradOutput(s.name));
  return g;
}

/**
 * Whether the last layer runs on the B + K rows the heads read: its attention then scores M = B + K
 * queries against all N = B·S keys (masking other sequences' keys) instead of S per sequence, so
 * it is used only while that score tensor is at most 4 times a full layer's (M ≤ 4S).
 */
function prunesLastLayer(batchSize: number, seqLen: number, mlmPositions: number): boolean {
  return batchSize + mlmPositions <= 4 * seqLen;
}

/**
 * The additive attention mask of gathered query rows (int64 [M], flat positions) over all N = B·S
 * keys, (1, 1, M, N): a key of the query's own sequence gets that sequence's mask value (0 or
 * min), any other −∞, so its softmax weight is exactly 0 and each row equals its sequence's.
 */
function crossSequenceMask(g: Graph, queryRows: Value, additiveMask: Value, B: number, S: number): Value {
  const N = B * S;
  const M = queryRows.shape[0]!;
  const keySequence = g.constant(int64Tensor([1, N], Array.from({ length: N }, (_, n) => Math.floor(n / S))));
  const querySequence = g.reshape(g.div(queryRows, g.constant(int64Tensor([], [S]))), [M, 1]);
  const own = g.where(g.equal(querySequence, keySequence), g.reshape(additiveMask, [1, N]), g.constant(floatTensor(g.float, [], [-Infinity])));
  return g.reshape(own, [1, 1, M, N]);
}

/** Rows `ids` (int32, [N]) of `table`, its gradient summed as `gradient` says (AlbertGraphOptions). */
function embeddingLookup(g: Graph, table: Value, ids: Value, gradient: EmbeddingGradient): Value {
  const rows = g.gather(table, ids); // (N, E)
  if (gradient === 'scatter') return rows;
  const [V, E] = table.shape as [number, number];
  const n = ids.shape[0]!;
  return g.fused([table], rows, (g, d) => {
    const oneHot = g.cast(g.equal(g.reshape(ids, [n, 1]), g.constant(int32Tensor([1, V], Array.from({ length: V }, (_, i) => i)))), d.dtype); // (N, V)
    return [g.gemm(oneHot, g.reshape(d, [n, E]), undefined, true)]; // (V, E)
  });
}

/**
 * Word-embedding lookup with torch's padding_idx semantics: the forward value is the plain lookup
 * (`rows`), but positions holding the pad id pass no gradient to the table (their term is detached).
 */
function wordLookup(g: Graph, rows: Value, ids: Value, padId: number): Value {
  const n = ids.shape[0]!;
  const isPad = g.cast(g.reshape(g.equal(ids, g.constant(int32Tensor([], [padId]))), [n, 1]), g.float); // (N, 1)
  const keep = g.sub(g.scalar(1), isPad);
  return g.add(g.mul(rows, keep), g.mul(g.detach(rows), isPad));
}

/**
 * Mean cross-entropy over rows whose label ≠ −100, from LogSoftmax and a one-hot built with Equal
 * (an ignored label matches no class, so its row contributes 0), and the accuracy over those rows.
 * With no labelled row both are 0 (HF's mean over nothing would be NaN).
 */
function crossEntropy(g: Graph, logits: Value, labels: Value): { loss: Value; accuracy: Value } {
  const [M, C] = logits.shape as [number, number];
  const column = g.reshape(labels, [M, 1]);
  const oneHot = g.cast(g.equal(column, g.constant(int32Tensor([1, C], Array.from({ length: C }, (_, i) => i)))), g.float); // (M, C)
  const nllSum = g.neg(g.reduceSum(g.mul(g.logSoftmax(logits), oneHot), [], false)); // ()
  const valid = g.cast(g.not(g.equal(labels, g.constant(int32Tensor([], [IGNORE_INDEX])))), g.float); // (M)
  const count = g.max(g.reduceSum(valid, [], false), g.scalar(1));
  const hits = g.cast(g.equal(g.argMaxLast(logits), g.cast(labels, 'int64')), g.float); // (M)
  return { loss: g.div(nllSum, count), accuracy: g.div(g.reduceSum(g.mul(hits, valid), [], false), count) };
}

