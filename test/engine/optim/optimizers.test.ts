import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createOptimizer, hfNoDecay, type OptimizerConfig } from '../../../src/engine/optim/index.js';
import { ParameterSet, type ParamSpec } from '../../../src/engine/params.js';
import { RefOptimizer } from './reference.js';

// Float32 storage against a float64 reference: after a few steps the weights agree to about
// 1e-6 relative; the bound below leaves room for float32 rounding of w, m and v, nothing more.
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
    for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!) / Math.max(1e-3, Math.abs(want[i]!)));
  });
  return worst;
}

function compareWithReference(config: OptimizerConfig, ref: (tensors: { name: string; w: number[] }[]) => RefOptimizer, seed: number): void {
  const rand = rng(seed);
  const params = ParameterSet.allocate(LAYOUT);
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

test('LAMB matches a float64 reference of torch_optimizer.Lamb (debias, clamp 10) over six steps', () => {
  compareWithReference({ kind: 'lamb', weightDecay: 0.01, eps: 1e-6 }, (t) => new RefOptimizer('lamb', t, { beta1: 0.9, beta2: 0.999, eps: 1e-6, weightDecay: 0.01, noDecay: hfNoDecay, clamp: 10 }), 1);
});

test('LAMB without bias correction and with large weight decay matches the reference', () => {
  compareWithReference({ kind: 'lamb', weightDecay: 0.3, biasCorrection: false, betas: [0.8, 0.99] }, (t) => new RefOptimizer('lamb', t, { beta1: 0.8, beta2: 0.99, eps: 1e-6, weightDecay: 0.3, noDecay: hfNoDecay, clamp: 10, debias: false }), 2);
});

test('AdamW matches a float64 reference of torch.optim.AdamW over six steps', () => {
  compareWithReference({ kind: 'adamw', weightDecay: 0.1, eps: 1e-8 }, (t) => new RefOptimizer('adamw', t, { beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1, noDecay: hfNoDecay }), 3);
});
