import assert from 'node:assert/strict';
import test from 'node:test';
import { PRESET_NAMES, PRESETS, type AlbertConfig } from '../../src/engine/albert/config.js';
import { buildAlbertGraph, LOSS_SCALE_INPUT } from '../../src/engine/albert/graph.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { compareRuns, HALF_PRECISION_TOLERANCE } from '../../src/engine/compare-runs.js';
import { encodeModel } from '../../src/engine/onnx/encode.js';
import { OrtBackend } from '../../src/engine/ort-backend.js';
import type { ParameterSet } from '../../src/engine/params.js';
import { Rng } from '../../src/engine/rng.js';
import { syntheticBatch } from '../../src/engine/synthetic.js';
import { PADDED_TINY_BATCH } from '../helpers/albert-batch.js';

// The tiny preset on a batch with padding and ignored labels (as in albert-grad.test.ts).
const config: AlbertConfig = PRESETS.tiny;
const batch = PADDED_TINY_BATCH;

/** HF's initialisation (what training starts from), and one with larger, spread-out values. */
function paramSets(): Array<[string, ParameterSet]> {
  const spread = initAlbertParams({ ...config, initializerRange: 0.2 }, 7);
  const rng = new Rng(3);
  for (const s of spread.specs) if (s.shape.length === 1) for (let i = 0; i < s.size; i++) spread.view(s.name)[i]! += 0.2 * (rng.uniform() - 0.5);
  return [['HF init', initAlbertParams(config, 1)], ['spread', spread]];
}

const norm = (xs: ArrayLike<number>) => Math.sqrt(Array.from(xs).reduce((a, x) => a + x * x, 0));
const diffNorm = (a: ArrayLike<number>, b: ArrayLike<number>) => norm(Array.from(a, (x, i) => x - b[i]!));

test('the fp16 graph computes float16 matmuls on float32 master weights and returns float32 gradients', () => {
  const g = buildAlbertGraph(config, { batchSize: 2, seqLen: 5, precision: 'fp16' });
  const half = (op: string) => g.nodes.filter((n) => n.op === op && n.outputs[0]!.dtype === 'float16').length;
  // 6 Linears per layer application (q, k, v, dense, ffn, ffn_output) + the embedding projection,
  // predictions.dense and the decoder; 2 attention MatMuls per layer (forward only: the backward adds more)
  assert.ok(half('Gemm') >= 6 * config.numHiddenLayers + 3, `float16 Gemms: ${half('Gemm')}`);
  assert.ok(half('MatMul') >= 2 * config.numHiddenLayers, `float16 MatMuls: ${half('MatMul')}`);
  for (const op of ['LayerNormalization', 'Softmax', 'LogSoftmax', 'Tanh']) assert.equal(half(op), 0, `${op} must stay float32`);
  const scale = g.inputs.find((v) => v.name === LOSS_SCALE_INPUT);
  assert.deepEqual(scale && { dtype: scale.dtype, shape: scale.shape }, { dtype: 'float32', shape: [] });
  assert.ok(g.inputs.filter((v) => v.name !== LOSS_SCALE_INPUT && v.dtype !== 'int32').every((v) => v.dtype === 'float32'), 'parameters are float32 inputs');
  for (const out of g.outputs) assert.equal(out.dtype, 'float32', `${out.name} is an output`);
  assert.throws(() => buildAlbertGraph(config, { batchSize: 2, seqLen: 5, float: 'float64', precision: 'fp16' }), /fp16 needs float32 master weights, not float64/);
});

test('precision fp32 builds exactly the graph that an unspecified precision builds, with no float16 in it', () => {
  for (const float of ['float32', 'float64'] as const) {
    const plain = buildAlbertGraph(config, { batchSize: 2, seqLen: 5, float });
    const fp32 = buildAlbertGraph(config, { batchSize: 2, seqLen: 5, float, precision: 'fp32' });
    assert.deepEqual(encodeModel(fp32), encodeModel(plain));
    assert.ok(!fp32.nodes.some((n) => n.outputs.some((o) => o.dtype === 'float16')), `${float}: no float16 value`);
    assert.ok(!fp32.inputs.some((v) => v.name === LOSS_SCALE_INPUT), `${float}: no loss scale input`);
  }
});

test('fp16 vs fp32, every preset: loss and every gradient tensor agree within HALF_PRECISION_TOLERANCE', async () => {
  // The tolerance and its reasoning: src/engine/compare-runs.ts. Measured on CPU: ≤ 5e-4 from HF init,
  // ≤ 3e-3 from spread-out weights (ORT's CPU provider drops the Cast pairs it wraps around Gemm, so
  // CUDA's all-float16 Gemms will sit nearer the bound; `cohort doctor --gpu` compares there).
  // base and large at a tiny shape (2×8): their 12 and 24 layer applications are what adds up.
  for (const preset of PRESET_NAMES) {
    const cfg = PRESETS[preset];
    const [sets, presetBatch] = preset === 'tiny' ? [paramSets(), batch] : [[['HF init', initAlbertParams(cfg, 1)] as [string, ParameterSet]], syntheticBatch(cfg, 2, 8, new Rng(5))];
    const fp32 = new OrtBackend(cfg, { provider: 'cpu', intraOpThreads: 1 });
    const fp16 = new OrtBackend(cfg, { provider: 'cpu', intraOpThreads: 1, precision: 'fp16' });
    try {
      for (const [label, params] of sets) {
        const ref = await fp32.forwardBackward(params, presetBatch);
        const r = await fp16.forwardBackward(params, presetBatch, undefined, { lossScale: 2 ** 10 });
        assert.ok(r.gradsFinite && ref.gradsFinite, `${preset} ${label}`);
        const comparison = compareRuns(ref, r, HALF_PRECISION_TOLERANCE);
        assert.deepEqual(comparison.failures, [], `${preset} ${label}`);
        // the float16 rounding is real: the two runs are not the same computation
        assert.ok(comparison.worst.relative > 0, `${preset} ${label}: fp16 gradients are bit-identical to fp32`);
      }
    } finally {
      await fp32.close();
      await fp16.close();
    }
  }
});

test('the comparison catches a gradient outside the tolerance and names its tensor', async () => {
  const params = initAlbertParams(config, 1);
  const backend = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1 });
  try {
    const ref = await backend.forwardBackward(params, batch);
    const off = await backend.forwardBackward(params, batch);
    const name = 'albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight';
    assert.deepEqual(compareRuns(ref, off, HALF_PRECISION_TOLERANCE).failures, []);
    off.grads.view(name).forEach((g, i, view) => (view[i] = g * 1.05));
    assert.deepEqual(compareRuns(ref, off, HALF_PRECISION_TOLERANCE).failures, [`${name}: ‖Δg‖/‖g‖ = 5.00e-2 > 0.01`]);
  } finally {
    await backend.close();
  }
});

test('gradients come back unscaled: the loss scale changes what float16 can hold, not the result', async () => {
  const params = initAlbertParams(config, 1);
  const backend = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1, precision: 'fp16' });
  try {
    const low = (await backend.forwardBackward(params, batch, undefined, { lossScale: 2 ** 4 })).grads;
    const high = await backend.forwardBackward(params, batch, undefined, { lossScale: 2 ** 12 });
    assert.ok(high.gradsFinite);
    // powers of two scale float16 values exactly, so only gradients that underflow at 2⁴ differ
    const rel = diffNorm(low.data, high.grads.data) / norm(high.grads.data);
    assert.ok(rel < 1e-3, `relative difference ${rel}`);
    // 2⁴⁰ × the loss overflows float16 (max 65504) in the backward pass
    assert.equal((await backend.forwardBackward(params, batch, undefined, { lossScale: 2 ** 40 })).gradsFinite, false);
    await assert.rejects(backend.forwardBackward(params, batch, undefined, { lossScale: 0 }), /loss scale 0 is not a finite number > 0/);
  } finally {
    await backend.close();
  }
  const fp32 = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1 });
  await assert.rejects(fp32.forwardBackward(params, batch, undefined, { lossScale: 8 }), /loss scale 8 needs precision fp16 \(this backend is fp32\)/);
  await fp32.close();
});
