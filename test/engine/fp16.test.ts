import assert from 'node:assert/strict';
import test from 'node:test';
import { PRESETS, type AlbertConfig } from '../../src/engine/albert/config.js';
import { buildAlbertGraph, LOSS_SCALE_INPUT } from '../../src/engine/albert/graph.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { encodeModel } from '../../src/engine/onnx/encode.js';
import { OrtBackend } from '../../src/engine/ort-backend.js';
import type { ParameterSet } from '../../src/engine/params.js';
import { Rng } from '../../src/engine/rng.js';
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

test('fp16 vs fp32 on the tiny preset: loss and every gradient tensor agree within fp16 tolerance', async () => {
  // Tolerance, from float16's unit roundoff u = 2⁻¹¹ ≈ 4.9e-4: each float16 Gemm rounds its operands
  // and its result (a few u per element), and the error passes through 2 layer applications forward
  // and backward, so ≈ 10u ≈ 5e-3 relative is the expected scale; we allow 1e-2 on
  // ‖g₁₆ − g₃₂‖ / ‖g₃₂‖ per tensor and 2e-3 on the loss (softmax/log-softmax/losses are float32).
  // Measured on CPU: ≤ 5e-4 from HF init, ≤ 3e-3 from spread-out weights (ORT's CPU provider drops
  // the Cast pairs it wraps around Gemm, so CUDA's all-float16 Gemms will sit nearer the bound).
  // attention.key.bias has an exact gradient of 0 (softmax ignores a per-query shift): what both
  // runs return is cancellation residue, so it is bounded by u × the global gradient norm instead.
  const fp32 = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1 });
  const fp16 = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1, precision: 'fp16' });
  try {
    for (const [label, params] of paramSets()) {
      const ref = await fp32.forwardBackward(params, batch);
      const r = await fp16.forwardBackward(params, batch, undefined, { lossScale: 2 ** 10 });
      assert.ok(r.gradsFinite && ref.gradsFinite, label);
      assert.ok(Math.abs(r.loss - ref.loss) <= 2e-3 * Math.abs(ref.loss), `${label}: loss ${r.loss} (fp16) vs ${ref.loss} (fp32)`);
      assert.ok(Math.abs(r.mlmLoss - ref.mlmLoss) <= 2e-3 * Math.abs(ref.mlmLoss) && Math.abs(r.sopLoss - ref.sopLoss) <= 2e-3 * Math.abs(ref.sopLoss), `${label}: MLM/SOP losses`);
      const residue = 2 ** -11 * norm(ref.grads.data);
      let differs = false;
      for (const s of params.specs) {
        const [a, b] = [r.grads.view(s.name), ref.grads.view(s.name)];
        if (s.name.endsWith('attention.key.bias')) {
          assert.ok(norm(a) <= residue && norm(b) <= residue, `${label}: ${s.name} should be ≈ 0: ‖fp16‖ ${norm(a)}, ‖fp32‖ ${norm(b)}`);
          continue;
        }
        const rel = diffNorm(a, b) / norm(b);
        assert.ok(rel <= 1e-2, `${label}: ${s.name} relative difference ${rel.toExponential(2)}`);
        differs ||= rel > 0;
      }
      // the float16 rounding is real: the two runs are not the same computation
      assert.ok(differs, `${label}: fp16 gradients are bit-identical to fp32`);
    }
  } finally {
    await fp32.close();
    await fp16.close();
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
