import assert from 'node:assert/strict';
import test from 'node:test';
import * as ort from 'onnxruntime-node';
import { geluNew } from '../../src/engine/fused.js';
import { encodeModel } from '../../src/engine/onnx/encode.js';
import { Graph, int64Tensor } from '../../src/engine/onnx/graph.js';
import { RULES } from '../../src/engine/rules.js';
import { gradCheck, randomInput } from '../helpers/gradcheck.js';

// Tolerance: float64 central differences with h = 1e-6 agree with the analytic VJP to
// |analytic − numeric| ≤ 1e-8 + 1e-6·|numeric| for every rule.
const cases: Record<string, Parameters<typeof gradCheck>[0]> = {
  'Add (broadcast [4] onto [3,4])': (g, r) => {
    const [a, b] = [randomInput(g, r, 'a', [3, 4]), randomInput(g, r, 'b', [4])];
    return { inputs: [a, b], y: g.add(a.value, b.value) };
  },
  'Sub (broadcast [3,1])': (g, r) => {
    const [a, b] = [randomInput(g, r, 'a', [3, 4]), randomInput(g, r, 'b', [3, 1])];
    return { inputs: [a, b], y: g.sub(a.value, b.value) };
  },
  'Mul (broadcast [2,1,4] × [3,1])': (g, r) => {
    const [a, b] = [randomInput(g, r, 'a', [2, 1, 4]), randomInput(g, r, 'b', [3, 1])];
    return { inputs: [a, b], y: g.mul(a.value, b.value) };
  },
  'Div': (g, r) => {
    const a = randomInput(g, r, 'a', [3, 4]);
    const b = randomInput(g, r, 'b', [4]);
    b.data.forEach((v, i) => (b.data[i] = 2 + Math.abs(v))); // keep away from 0
    return { inputs: [a, b], y: g.div(a.value, b.value) };
  },
  'Neg + Exp': (g, r) => {
    const a = randomInput(g, r, 'a', [5]);
    return { inputs: [a], y: g.exp(g.neg(a.value)) };
  },
  Tanh: (g, r) => {
    const a = randomInput(g, r, 'a', [2, 5]);
    return { inputs: [a], y: g.tanh(a.value) };
  },
  Softmax: (g, r) => {
    const a = randomInput(g, r, 'a', [2, 3, 5]);
    return { inputs: [a], y: g.softmax(a.value) };
  },
  LogSoftmax: (g, r) => {
    const a = randomInput(g, r, 'a', [3, 6]);
    return { inputs: [a], y: g.logSoftmax(a.value) };
  },
  'MatMul (batched, 2-D right operand broadcast)': (g, r) => {
    const [a, b] = [randomInput(g, r, 'a', [2, 3, 4]), randomInput(g, r, 'b', [4, 5])];
    return { inputs: [a, b], y: g.matmul(a.value, b.value) };
  },
  'Gemm (transB, bias)': (g, r) => {
    const [a, b, c] = [randomInput(g, r, 'a', [3, 4]), randomInput(g, r, 'b', [5, 4]), randomInput(g, r, 'c', [5])];
    return { inputs: [a, b, c], y: g.gemm(a.value, b.value, c.value, false, true) };
  },
  'Gemm (no trans)': (g, r) => {
    const [a, b] = [randomInput(g, r, 'a', [3, 4]), randomInput(g, r, 'b', [4, 2])];
    return { inputs: [a, b], y: g.gemm(a.value, b.value, undefined) };
  },
  'Gather (repeated ids accumulate)': (g, r) => {
    const table = randomInput(g, r, 'table', [5, 3]);
    const ids = g.constant(int64Tensor([2, 3], [1, 4, 1, 0, 1, 4]));
    return { inputs: [table], y: g.gather(table.value, ids) };
  },
  'Gather (activation rows at MLM positions, padding repeats row 0)': (g, r) => {
    const hidden = randomInput(g, r, 'hidden', [6, 3]);
    const positions = g.constant(int64Tensor([5], [1, 4, 5, 0, 0]));
    return { inputs: [hidden], y: g.gather(g.tanh(hidden.value), positions) };
  },
  LayerNormalization: (g, r) => {
    const [x, gamma, beta] = [randomInput(g, r, 'x', [2, 3, 6]), randomInput(g, r, 'gamma', [6]), randomInput(g, r, 'beta', [6])];
    return { inputs: [x, gamma, beta], y: g.layerNorm(x.value, gamma.value, beta.value, 1e-12).y };
  },
  'Reshape + Transpose': (g, r) => {
    const a = randomInput(g, r, 'a', [2, 6]);
    return { inputs: [a], y: g.transpose(g.reshape(a.value, [2, 3, 2]), [2, 0, 1]) };
  },
  Slice: (g, r) => {
    const a = randomInput(g, r, 'a', [3, 5]);
    return { inputs: [a], y: g.slice(a.value, [1, 2], [3, 4], [0, 1]) };
  },
  'ReduceSum (keepdims 0)': (g, r) => {
    const a = randomInput(g, r, 'a', [2, 3, 4]);
    return { inputs: [a], y: g.reduceSum(a.value, [1], false) };
  },
  ReduceMean: (g, r) => {
    const a = randomInput(g, r, 'a', [2, 3, 4]);
    return { inputs: [a], y: g.reduceMean(a.value, [0, 2]) };
  },
  'fused gelu_new (its own VJP)': (g, r) => {
    const a = randomInput(g, r, 'a', [3, 7]);
    return { inputs: [a], y: geluNew(g, a.value) };
  },
  'Cast (float64 → float32 → float64)': (g, r) => {
    const a = randomInput(g, r, 'a', [4]);
    return { inputs: [a], y: g.cast(g.mul(g.cast(a.value, 'float32'), g.cast(g.scalar(1), 'float32')), 'float64') };
  },
};

for (const [name, build] of Object.entries(cases)) {
  test(`VJP ${name} matches central differences`, async () => {
    // float32 round trips lose precision: the Cast case is checked at float32 tolerance
    const tol = name.startsWith('Cast') ? { rtol: 1e-3, atol: 1e-3, h: 1e-2 } : {};
    const result = await gradCheck(build, tol);
    assert.ok(result.checked > 0);
    assert.ok(result.worst <= 1, `worst error ${result.worst.toFixed(3)}× tolerance at ${result.where}`);
  });
}

test('fused gelu_new (computed in sigmoid form) equals HF\'s ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (float64)', async () => {
  // Tolerance: 1e-14 absolute; the two forms agree exactly in real arithmetic.
  const xs = Float64Array.from({ length: 41 }, (_, i) => (i - 20) / 4);
  const g = new Graph('float64');
  const x = g.input('x', [xs.length]);
  g.output(geluNew(g, x), 'y');
  const session = await ort.InferenceSession.create(encodeModel(g));
  const y = (await session.run({ x: new ort.Tensor('float64', xs, [xs.length]) })).y!.data as Float64Array;
  await session.release();
  xs.forEach((v, i) => {
    const hf = 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
    assert.ok(Math.abs(y[i]! - hf) <= 1e-14, `gelu_new(${v}) = ${y[i]}, HF's form gives ${hf}`);
  });
});

test('every rule in the table is exercised by a case above', () => {
  const covered = Object.keys(cases).join(' ');
  const missing = Object.keys(RULES).filter((op) => op !== 'Identity' && !covered.includes(op));
  assert.deepEqual(missing, []);
});
