import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createOptimizer, hfNoDecay, type OptimizerConfig } from '../../../src/engine/optim/index.js';
import { ParameterSet, type ParamSpec } from '../../../src/engine/params.js';
import { RefOptimizer } from './reference.js';

// float32 arithmetic (as torch's) against a float64 reference: each step rounds w, m, v and the
// update a few times at ~6e-8 relative, so after six steps the weights agree within 2e-6 relative,
// measured against max(|w|, 0.01) so that weights near zero are held to 2e-8 absolute (a few
// float32 ulps of a step's change) rather than to a relative bound float32 cannot meet.
const TOLERANCE = 2e-6;

const LAYOUT: ParamSpec[] = [
  { name: 'albert.embeddings.word_embeddings.weight', shape: [13, 8] },
  { name: 'albert.embeddings.LayerNorm.weight', shape: [8] },
  { name: 'albert.embeddings.LayerNorm.bias', shape: [8] },
  { name: 'albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight', shape: [16, 8] },
  { name: 'albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.bias', shape: [16] },
  { name: 'predictions.decoder.bias', shape: [13] },
];

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s / 4294967296 - 0.5;
  };
}

function fill(set: ParameterSet, scale: number, rand: () => number): void {
  for (let i = 0; i < set.data.length; i++) set.data[i] = rand() * scale;
}

function toRef(set: ParameterSet): { name: string; w: number[] }[] {
  return set.specs.map((s) => ({ name: s.name, w: Array.from(set.view(s.name)) }));
}

function maxRelError(actual: ParameterSet, expected: { w: number[] }[]): number {
  let worst = 0;
  actual.specs.forEach((s, k) => {
    const got = actual.view(s.name);
    const want = expected[k]!.w;
    for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!) / Math.max(0.01, Math.abs(want[i]!)));
  });
  return worst;
}

function compareWithReference(config: OptimizerConfig, ref: (tensors: { name: string; w: number[] }[]) => RefOptimizer, seed: number, layout = LAYOUT): void {
  const rand = rng(seed);
  const params = ParameterSet.allocate(layout);
  fill(params, 0.2, rand);
  const grads = params.zerosLike();
  const reference = ref(toRef(params));
  const opt = createOptimizer(params, config);
  const lrs = [1e-3, 5e-3, 2e-2, 1e-2, 3e-3, 1e-3];
  for (const lr of lrs) {
    // gradients of mixed magnitudes so the moments are not all alike
    for (let i = 0; i < grads.data.length; i++) grads.data[i] = rand() * (i % 7 === 0 ? 5 : 0.05);
    const refGrads = params.specs.map((s) => Array.from(grads.view(s.name)));
    opt.step(params, grads, lr);
    reference.step(refGrads, lr);
  }
  assert.equal(opt.stepCount, lrs.length);
  const err = maxRelError(params, reference.tensors);
  assert.ok(err < TOLERANCE, `max relative error ${err} ≥ ${TOLERANCE}`);
}

test('LAMB matches a float64 reference of torch_optimizer.Lamb (debias, default clamp 10000) over six steps', () => {
  compareWithReference({ kind: 'lamb', weightDecay: 0.01, eps: 1e-6 }, (t) => new RefOptimizer('lamb', t, { beta1: 0.9, beta2: 0.999, eps: 1e-6, weightDecay: 0.01, noDecay: hfNoDecay, clamp: 10000 }), 1);
});

test('LAMB without bias correction and with large weight decay matches the reference', () => {
  compareWithReference({ kind: 'lamb', weightDecay: 0.3, biasCorrection: false, betas: [0.8, 0.99], clampValue: 10 }, (t) => new RefOptimizer('lamb', t, { beta1: 0.8, beta2: 0.99, eps: 1e-6, weightDecay: 0.3, noDecay: hfNoDecay, clamp: 10, debias: false }), 2);
});

test('AdamW matches a float64 reference of torch.optim.AdamW over six steps', () => {
  compareWithReference({ kind: 'adamw', weightDecay: 0.1, eps: 1e-8 }, (t) => new RefOptimizer('adamw', t, { beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1, noDecay: hfNoDecay }), 3);
});

// The kernels stage tensors through 16384-element blocks in 4-lane vectors: tensors that span
// several blocks and end mid-vector must come out the same as small ones.
const BLOCKY: ParamSpec[] = [
  { name: 'big.weight', shape: [3, 13335] }, // 40005 elements: three blocks, the last ending mid-vector
  { name: 'tiny.bias', shape: [3] },
  { name: 'exact.weight', shape: [128, 128] }, // exactly one block
  { name: 'odd.LayerNorm.weight', shape: [5] },
];

test('LAMB and AdamW match the references on tensors spanning several blocks and ending mid-vector', () => {
  compareWithReference({ kind: 'lamb', weightDecay: 0.05, clampValue: 10 }, (t) => new RefOptimizer('lamb', t, { beta1: 0.9, beta2: 0.999, eps: 1e-6, weightDecay: 0.05, noDecay: hfNoDecay, clamp: 10 }), 4, BLOCKY);
  compareWithReference({ kind: 'adamw', weightDecay: 0.05 }, (t) => new RefOptimizer('adamw', t, { beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.05, noDecay: hfNoDecay }), 5, BLOCKY);
});

test('weight decay skips biases and LayerNorm weights by name (HF no_decay), and the predicate is overridable', () => {
  for (const kind of ['lamb', 'adamw'] as const) {
    const params = ParameterSet.allocate(LAYOUT);
    params.data.fill(0.5);
    const before = params.clone();
    const grads = params.zerosLike(); // zero gradients: only weight decay can move a weight
    createOptimizer(params, { kind, weightDecay: 0.1 }).step(params, grads, 0.01);
    for (const s of params.specs) {
      const moved = params.view(s.name).some((x, i) => x !== before.view(s.name)[i]);
      const exempt = s.name.endsWith('bias') || s.name.endsWith('LayerNorm.weight');
      assert.equal(moved, !exempt, `${kind}: ${s.name} ${moved ? 'moved' : 'did not move'}`);
      if (moved) assert.ok(params.view(s.name).every((x) => x < 0.5), `${kind}: ${s.name} decays toward 0`);
    }
    // HF's substring rule misses ALBERT's lower-case full_layer_layer_norm, as in the reference run
    assert.equal(hfNoDecay('albert.encoder.albert_layer_groups.0.albert_layers.0.full_layer_layer_norm.weight'), false);
    assert.equal(hfNoDecay('albert.encoder.albert_layer_groups.0.albert_layers.0.full_layer_layer_norm.bias'), true);
    const untouched = params.clone();
    createOptimizer(params, { kind, weightDecay: 0.1, decayExcluded: () => true }).step(params, grads, 0.01);
    assert.deepEqual(params.data, untouched.data, `${kind}: nothing decays when every tensor is excluded`);
  }
});

/**
 * One LAMB step (lr 1, so float32 rounding of w is far below the tolerance) from zero moments on a
 * single exempt tensor: returns ‖Δw‖ and the step's lr·√(1−β₂)/(1−β₁).
 */
function firstLambStep(w: number[], g: number[], clampValue?: number): { delta: number; scale: number } {
  const params = ParameterSet.allocate([{ name: 'layer.bias', shape: [w.length] }]);
  params.data.set(w);
  const grads = params.zerosLike();
  grads.data.set(g);
  const before = params.clone();
  createOptimizer(params, { kind: 'lamb', clampValue }).step(params, grads, 1);
  let sq = 0;
  for (let i = 0; i < w.length; i++) sq += (params.data[i]! - before.data[i]!) ** 2;
  return { delta: Math.sqrt(sq), scale: Math.sqrt(1 - 0.999) / (1 - 0.9) };
}

test('LAMB moves each tensor by lr·c·min(‖w‖, clamp): the weight norm is clamped before the trust ratio', () => {
  const g = [0.3, -2, 0.01, 5];
  const big = [60, 80, 0, 0]; // ‖w‖ = 100
  const small = [1.2, 0, -1.6, 0]; // ‖w‖ = 2
  const rel = (a: number, b: number): number => Math.abs(a - b) / b;
  const clamped = firstLambStep(big, g, 10);
  assert.ok(rel(clamped.delta, clamped.scale * 10) < 1e-5, `clamp 10: ‖Δw‖ ${clamped.delta} vs ${clamped.scale * 10}`);
  const loose = firstLambStep(big, g);
  assert.ok(rel(loose.delta, loose.scale * 100) < 1e-5, `default clamp 10000: ‖Δw‖ ${loose.delta} vs ${loose.scale * 100}`);
  const unclamped = firstLambStep(small, g, 10);
  assert.ok(rel(unclamped.delta, unclamped.scale * 2) < 1e-5, `‖w‖ below the clamp: ‖Δw‖ ${unclamped.delta} vs ${unclamped.scale * 2}`);
});

test('LAMB uses trust ratio 1 when the weights or the update are zero', () => {
  // w = 0: the plain bias-corrected Adam direction, m/(√v+ε) = 0.1g/(√0.001|g|+ε) per element
  const g = [0.5, -0.25, 2];
  const params = ParameterSet.allocate([{ name: 'zero.bias', shape: [3] }]);
  const grads = params.zerosLike();
  grads.data.set(g);
  createOptimizer(params, { kind: 'lamb' }).step(params, grads, 0.01);
  const c = Math.sqrt(1 - 0.999) / (1 - 0.9);
  g.forEach((gi, i) => {
    const expected = -0.01 * c * ((0.1 * gi) / (Math.sqrt(0.001) * Math.abs(gi) + 1e-6));
    assert.ok(Math.abs(params.data[i]! - expected) < 1e-8, `element ${i}: ${params.data[i]} vs ${expected}`);
  });
  // zero gradient on an exempt tensor: the update is zero, so nothing moves (and nothing is NaN)
  const still = ParameterSet.allocate([{ name: 'still.bias', shape: [2] }]);
  still.data.set([1, 2]);
  createOptimizer(still, { kind: 'lamb' }).step(still, still.zerosLike(), 0.01);
  assert.deepEqual(Array.from(still.data), [1, 2]);
});

test('step rejects a bad learning rate, a foreign layout (naming the tensor) and aliased buffers', () => {
  const params = ParameterSet.allocate(LAYOUT);
  const opt = createOptimizer(params, { kind: 'lamb' });
  assert.throws(() => opt.step(params, params.zerosLike(), -1), /learning rate .* got -1/);
  assert.throws(() => opt.step(params, params.zerosLike(), Number.NaN), /learning rate/);
  const other = ParameterSet.allocate(LAYOUT.map((s) => (s.name === 'predictions.decoder.bias' ? { ...s, shape: [14] } : s)));
  assert.throws(() => opt.step(params, other, 0.01), /grads does not match the parameters: tensor predictions\.decoder\.bias has shape \[14\], expected \[13\]/);
  assert.throws(() => opt.step(params, params, 0.01), /share one buffer/);
  assert.equal(opt.stepCount, 0, 'a refused step is not counted');
  // a separately allocated set with the same layout is accepted
  opt.step(ParameterSet.allocate(LAYOUT), ParameterSet.allocate(LAYOUT), 0.01);
  assert.equal(opt.stepCount, 1);
});

test('configs resolve to the hivemind ALBERT defaults and invalid values name the field', () => {
  const lamb = createOptimizer(ParameterSet.allocate(LAYOUT), { kind: 'lamb' }).config;
  assert.deepEqual({ ...lamb, decayExcluded: undefined }, { kind: 'lamb', lr: 0.00176, betas: [0.9, 0.999], eps: 1e-6, weightDecay: 0.01, clampValue: 10000, biasCorrection: true, decayExcluded: undefined });
  assert.equal(createOptimizer(ParameterSet.allocate(LAYOUT), { kind: 'adamw' }).config.eps, 1e-8);
  assert.throws(() => createOptimizer(ParameterSet.allocate(LAYOUT), { kind: 'lamb', betas: [1, 0.999] }), /betas\[0\] must be in \[0, 1\); got 1/);
  assert.throws(() => createOptimizer(ParameterSet.allocate(LAYOUT), { kind: 'adamw', eps: 0 }), /eps must be/);
  assert.throws(() => createOptimizer(ParameterSet.allocate(LAYOUT), { kind: 'lamb', clampValue: -1 }), /clampValue/);
  assert.throws(() => createOptimizer(ParameterSet.allocate(LAYOUT), { kind: 'sgd' } as unknown as OptimizerConfig), /kind "sgd" is unknown; accepted: lamb, adamw/);
});
