import assert from 'node:assert/strict';
import { test } from 'node:test';
import { clipGradNorm, gradNorm } from '../../../src/engine/optim/index.js';
import { ParameterSet } from '../../../src/engine/params.js';

function grads345(): ParameterSet {
  const g = ParameterSet.allocate([
    { name: 'a.weight', shape: [1, 2] },
    { name: 'b.bias', shape: [3] },
  ]);
  g.data.set([3, 0, 0, -4, 0]); // global norm 5 across two tensors
  return g;
}

test('clipGradNorm returns the global norm and scales by maxNorm/(norm+1e-6) only when above maxNorm', () => {
  const g = grads345();
  assert.equal(clipGradNorm(g, 1), 5);
  const f = 1 / (5 + 1e-6);
  [3, 0, 0, -4, 0].forEach((x, i) => assert.ok(Math.abs(g.data[i]! - x * f) <= 1e-7 * Math.abs(x * f), `element ${i}: ${g.data[i]} vs ${x * f}`));
  assert.ok(Math.abs(gradNorm(g) - 1) < 1e-6);
  const h = grads345();
  assert.equal(clipGradNorm(h, 10), 5);
  assert.deepEqual(Array.from(h.data), [3, 0, 0, -4, 0], 'below maxNorm: untouched');
  assert.equal(clipGradNorm(h, Infinity), 5, 'Infinity only measures');
});

test('gradNorm sums every element across tensor and block boundaries (lengths not a multiple of 4)', () => {
  const g = ParameterSet.allocate([
    { name: 'x', shape: [7] },
    { name: 'y', shape: [3, 2] },
    { name: 'z', shape: [40001] }, // the kernels stage 16384 elements at a time
  ]);
  let expected = 0;
  for (let i = 0; i < g.data.length; i++) {
    g.data[i] = (i % 3) - 1 + (i % 1000) / 10;
    expected += g.data[i]! ** 2;
  }
  assert.ok(Math.abs(gradNorm(g) - Math.sqrt(expected)) <= 1e-12 * Math.sqrt(expected));
  // clipping scales every element, the last one included
  const last = g.data[g.data.length - 1]!;
  clipGradNorm(g, 1);
  assert.ok(Math.abs(g.data[g.data.length - 1]! - last / Math.sqrt(expected)) < 1e-7 * Math.abs(last / Math.sqrt(expected)) + 1e-12);
  assert.ok(Math.abs(gradNorm(g) - 1) < 1e-5);
});

test('a NaN or infinite gradient throws naming the tensor and leaves the gradients untouched', () => {
  for (const bad of [Number.NaN, Infinity]) {
    const g = grads345();
    g.view('b.bias')[1] = bad;
    const before = Array.from(g.data);
    assert.throws(() => clipGradNorm(g, 1), new RegExp(`gradient norm is (NaN|Infinity): tensor b\\.bias has non-finite values`));
    assert.deepEqual(Array.from(g.data), before);
  }
  assert.throws(() => clipGradNorm(grads345(), 0), /maxNorm must be a number > 0/);
});
