import assert from 'node:assert/strict';
import test from 'node:test';
import * as ort from 'onnxruntime-node';
import { PRESETS, type AlbertConfig } from '../../src/engine/albert/config.js';
import { buildAlbertGraph, gradOutput, METRIC_OUTPUTS, type EmbeddingGradient } from '../../src/engine/albert/graph.js';
import { labelledPositions } from '../../src/engine/albert/mlm-positions.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { encodeModel } from '../../src/engine/onnx/encode.js';
import { OrtBackend } from '../../src/engine/ort-backend.js';
import { Rng } from '../../src/engine/rng.js';
import { PADDED_TINY_BATCH } from '../helpers/albert-batch.js';

// The tiny preset (4 heads, 2 applications of the shared layer) on a batch with padding and ignored labels.
const config: AlbertConfig = PRESETS.tiny;
const batch = PADDED_TINY_BATCH;

/** Parameters with spread-out values (init std 0.02 would make most gradients tiny). */
function params() {
  const p = initAlbertParams({ ...config, initializerRange: 0.4 }, 7);
  const rng = new Rng(3);
  for (const s of p.specs) if (s.shape.length === 1) for (let i = 0; i < s.size; i++) p.view(s.name)[i]! += 0.2 * (rng.uniform() - 0.5);
  return p;
}

/** K for the gathered-head graph: the batch has 3 labelled positions, so 2 slots are padding. */
const K = 5;

/**
 * The float64 graph with the MLM head on K gathered positions (and, by default, the last layer on the rows the
 * heads read only), or on all positions when `mlmPositions` is undefined.
 */
async function float64Session(mlmPositions: number | undefined, pruneLastLayer?: boolean, embeddingGradient?: EmbeddingGradient) {
  const session = await ort.InferenceSession.create(encodeModel(buildAlbertGraph(config, { batchSize: 2, seqLen: 5, float: 'float64', mlmPositions, pruneLastLayer, embeddingGradient })));
  const run = async (values: Map<string, Float64Array>, fetch?: string[]) => {
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int32', batch.inputIds, [2, 5]),
      token_type_ids: new ort.Tensor('int32', batch.tokenTypeIds, [2, 5]),
      attention_mask: new ort.Tensor('int32', batch.attentionMask, [2, 5]),
      sentence_order_label: new ort.Tensor('int32', batch.sentenceOrderLabel, [2]),
    };
    if (mlmPositions === undefined) feeds.labels = new ort.Tensor('int32', batch.labels, [2, 5]);
    else {
      const picked = labelledPositions(batch.labels, mlmPositions);
      assert.ok('positions' in picked, `${K} slots hold the batch's labelled positions`);
      feeds.mlm_positions = new ort.Tensor('int64', picked.positions, [mlmPositions]);
      feeds.mlm_labels = new ort.Tensor('int32', picked.labels, [mlmPositions]);
    }
    for (const s of p0.specs) feeds[s.name] = new ort.Tensor('float64', values.get(s.name)!, [...s.shape]);
    return fetch ? session.run(feeds, fetch) : session.run(feeds);
  };
  return { session, run };
}
const p0 = params();

test('tiny ALBERT (MLM head on gathered positions): every parameter tensor\'s gradient matches central differences (float64, sampled)', async () => {
  // Tolerance: |analytic − numeric| ≤ 1e-7 + 1e-5·|numeric| with h = 1e-5, float64 throughout.
  const { session, run } = await float64Session(K);
  const values = new Map(p0.specs.map((s) => [s.name, Float64Array.from(p0.view(s.name))]));
  const analytic = await run(values);
  const rng = new Rng(11);
  const h = 1e-5;
  let checked = 0;
  for (const s of p0.specs) {
    const x = values.get(s.name)!;
    const grad = analytic[gradOutput(s.name)]!.data as Float64Array;
    // the pad id's row is skipped: by torch's padding_idx semantics its lookup passes no gradient,
    // which finite differences of the forward pass cannot reproduce
    const skip = s.name === 'albert.embeddings.word_embeddings.weight' ? config.embeddingSize : 0;
    for (let j = 0; j < 3; j++) {
      const k = skip + rng.int(s.size - skip);
      const x0 = x[k]!;
      x[k] = x0 + h;
      const up = ((await run(values, ['loss'])).loss!.data as Float64Array)[0]!;
      x[k] = x0 - h;
      const down = ((await run(values, ['loss'])).loss!.data as Float64Array)[0]!;
      x[k] = x0;
      const numeric = (up - down) / (2 * h);
      assert.ok(Math.abs(grad[k]! - numeric) <= 1e-7 + 1e-5 * Math.abs(numeric), `${s.name}[${k}]: analytic ${grad[k]} vs numeric ${numeric}`);
      checked++;
    }
  }
  assert.equal(checked, 3 * p0.specs.length);
  await session.release();
});

test('embedding gradients as one-hot matmuls (the WebGPU graph) = ScatterND scatter-adds: every gradient (float64, a batch with pad tokens)', async () => {
  // Tolerance: float64, only the summation order differs: |matmul − scatter| ≤ 1e-12 + 1e-9·(tensor's largest |scatter|).
  const values = new Map(p0.specs.map((s) => [s.name, Float64Array.from(p0.view(s.name))]));
  const outputs: ort.InferenceSession.ReturnType[] = [];
  for (const embeddingGradient of ['scatter', 'matmul'] as const) {
    const { session, run } = await float64Session(K, undefined, embeddingGradient);
    outputs.push(await run(values));
    await session.release();
  }
  const [scatter, matmul] = outputs as [ort.InferenceSession.ReturnType, ort.InferenceSession.ReturnType];
  for (const s of p0.specs) {
    const [a, b] = [scatter[gradOutput(s.name)]!.data as Float64Array, matmul[gradOutput(s.name)]!.data as Float64Array];
    const scale = Math.max(...Array.from(a, Math.abs));
    a.forEach((v, i) => assert.ok(Math.abs(b[i]! - v) <= 1e-12 + 1e-9 * scale, `${s.name}[${i}]: matmul ${b[i]} vs scatter ${v}`));
  }
});

test('ORT float32 backend agrees with the float64 graph (loss, metrics, gradients)', async () => {
  const { session, run } = await float64Session(K);
  const reference = await run(new Map(p0.specs.map((s) => [s.name, Float64Array.from(p0.view(s.name))])));
  await session.release();
  const backend = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1 });
  const result = await backend.forwardBackward(p0, batch);
  await backend.close();
  const ref = (name: string) => (reference[name]!.data as Float64Array)[0]!;
  assert.ok(Math.abs(result.loss - ref('loss')) < 1e-4, `loss ${result.loss} vs ${ref('loss')}`);
  assert.ok(Math.abs(result.mlmLoss + result.sopLoss - result.loss) < 1e-5);
  assert.equal(result.mlmAccuracy, ref('mlm_accuracy'));
  for (const s of p0.specs) {
    const r = reference[gradOutput(s.name)]!.data as Float64Array;
    const scale = Math.max(...Array.from(r, Math.abs), 1e-3);
    result.grads.view(s.name).forEach((v, i) => assert.ok(Math.abs(v - r[i]!) <= 1e-3 * scale, `${s.name}[${i}]: ${v} vs ${r[i]}`));
  }
});

test('MLM head on gathered labelled positions (2 padding slots), with or without the last layer on those rows only, = on all positions: loss, metrics, every gradient (float64)', async () => {
  // Tolerance: float64, only the summation order differs: |gathered − full| ≤ 1e-12 + 1e-9·(tensor's largest |full|).
  const values = new Map(p0.specs.map((s) => [s.name, Float64Array.from(p0.view(s.name))]));
  const outputs = new Map<string, ort.InferenceSession.ReturnType>();
  for (const [variant, k, prune] of [['full', undefined, undefined], ['gathered', K, false], ['gathered, last layer pruned', K, true]] as const) {
    const { session, run } = await float64Session(k, prune);
    outputs.set(variant, await run(values));
    await session.release();
  }
  const full = outputs.get('full')!;
  for (const [variant, gathered] of outputs) {
    for (const name of [...METRIC_OUTPUTS, ...p0.specs.map((s) => gradOutput(s.name))]) {
      const [f, q] = [full[name]!.data as Float64Array, gathered[name]!.data as Float64Array];
      const scale = Math.max(...Array.from(f, Math.abs));
      f.forEach((v, i) => assert.ok(Math.abs(q[i]! - v) <= 1e-12 + 1e-9 * scale, `${name}[${i}]: ${variant} ${q[i]} vs full ${v}`));
    }
  }
  // the MLM head's gradient is not trivially zero, so the comparison above means something
  assert.ok((full[gradOutput('predictions.dense.weight')]!.data as Float64Array).some((v) => Math.abs(v) > 1e-6));
  assert.ok((full.mlm_loss!.data as Float64Array)[0]! > 0);
});
