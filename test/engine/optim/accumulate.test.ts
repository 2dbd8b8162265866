import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GradientAccumulator } from '../../../src/engine/optim/index.js';
import { ParameterSet } from '../../../src/engine/params.js';

const LAYOUT = [
  { name: 'w', shape: [2, 2] },
  { name: 'b', shape: [3] },
];

function gradsOf(values: number[]): ParameterSet {
  const g = ParameterSet.allocate(LAYOUT);
  g.data.set(values);
  return g;
}

test('the average weights each micro-batch by its sample count', () => {
  const acc = new GradientAccumulator(ParameterSet.allocate(LAYOUT));
  const g1 = [1, 2, 3, 4, 5, 6, 7];
  const g2 = [-1, 0, 1, 0.5, 2, -3, 10];
  acc.add(gradsOf(g1), 1);
  acc.add(gradsOf(g2), 3);
  assert.equal(acc.samples, 4);
  assert.equal(acc.microBatches, 2);
  const avg = acc.average();
  g1.forEach((x, i) => assert.ok(Math.abs(avg.data[i]! - (x + 3 * g2[i]!) / 4) < 1e-6, `element ${i}`));
  // into a caller's buffer too
  const out = ParameterSet.allocate(LAYOUT);
  assert.equal(acc.average(out), out);
  assert.deepEqual(out.data, avg.data);
});

test('reset starts a fresh accumulation; bad input is refused', () => {
  const acc = new GradientAccumulator(ParameterSet.allocate(LAYOUT));
  acc.add(gradsOf([9, 9, 9, 9, 9, 9, 9]), 5);
  acc.reset();
  assert.equal(acc.samples, 0);
  assert.throws(() => acc.average(), /no gradients accumulated/);
  acc.add(gradsOf([1, 2, 3, 4, 5, 6, 7]), 2);
  assert.deepEqual(Array.from(acc.average().data), [1, 2, 3, 4, 5, 6, 7], 'nothing of the batch before the reset remains');
  assert.throws(() => acc.add(gradsOf([0, 0, 0, 0, 0, 0, 0]), 0), /sample count must be an integer > 0; got 0/);
  assert.throws(() => acc.add(gradsOf([0, 0, 0, 0, 0, 0, 0]), 1.5), /sample count/);
  assert.throws(() => acc.add(ParameterSet.allocate([{ name: 'w', shape: [4] }, LAYOUT[1]!]), 1), /tensor w has shape \[4\], expected \[2, 2\]/);
  assert.equal(acc.samples, 2, 'refused batches are not counted');
});

test('accumulation covers buffers longer than one staging block, tail included', () => {
  const layout = [{ name: 'big.weight', shape: [40005] }];
  const acc = new GradientAccumulator(ParameterSet.allocate(layout));
  const a = ParameterSet.allocate(layout);
  const b = ParameterSet.allocate(layout);
  for (let i = 0; i < a.data.length; i++) {
    a.data[i] = (i % 17) - 8;
    b.data[i] = (i % 5) * 0.5;
  }
  acc.add(a, 2);
  acc.add(b, 6);
  const avg = acc.average();
  for (const i of [0, 16383, 16384, 32768, 40003, 40004]) {
    const want = (2 * a.data[i]! + 6 * b.data[i]!) / 8;
    assert.ok(Math.abs(avg.data[i]! - want) <= 1e-6 * Math.max(1, Math.abs(want)), `element ${i}: ${avg.data[i]} vs ${want}`);
  }
});
