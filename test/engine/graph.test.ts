import assert from 'node:assert/strict';
import test from 'node:test';
import * as ort from 'onnxruntime-node';
import { gradients } from '../../src/engine/autodiff.js';
import { floatTensor, Graph } from '../../src/engine/onnx/graph.js';
import { encodeModel } from '../../src/engine/onnx/encode.js';
import { probeProvider } from '../../src/doctor/ort-probe.js';

test('shapes are checked when a node is added, and the error names the op and shapes', () => {
  const g = new Graph();
  const a = g.input('a', [2, 3]);
  const b = g.input('b', [4, 5]);
  assert.throws(() => g.matmul(a, b), /MatMul: inner dimensions differ: \[2, 3\] × \[4, 5\]/);
  assert.throws(() => g.add(a, b), /Add: shapes \[2, 3\] and \[4, 5\] do not broadcast/);
  assert.throws(() => g.reshape(a, [5]), /Reshape: a \[2, 3\] cannot become \[5\]/);
  assert.throws(() => g.input('a', [1]), /already used/);
});

test('an encoded graph runs in onnxruntime with the shapes the builder computed', async () => {
  const g = new Graph();
  const x = g.input('x', [2, 3]);
  const w = g.input('w', [4, 3]);
  const y = g.softmax(g.gemm(x, w, g.scalar(1), false, true)); // (2, 4)
  assert.deepEqual(y.shape, [2, 4]);
  g.output(g.reduceSum(y, [-1], false), 'rowsum');
  const session = await ort.InferenceSession.create(encodeModel(g));
  const out = await session.run({ x: new ort.Tensor('float32', new Float32Array(6).fill(0.5), [2, 3]), w: new ort.Tensor('float32', new Float32Array(12).fill(0.1), [4, 3]) });
  assert.deepEqual(out.rowsum!.dims, [2]);
  for (const v of out.rowsum!.data as Float32Array) assert.ok(Math.abs(v - 1) < 1e-6);
  await session.release();
});

test('autodiff names the op that has no rule', () => {
  const g = new Graph();
  const x = g.input('x', [3]);
  const y = g.node('Sin', [x], [{ shape: [3], dtype: 'float32' }])[0]!;
  assert.throws(() => gradients(g, g.reduceSum(y, [], false), [x]), /no gradient rule for Sin/);
});

test('doctor\'s provider probe runs the builder-made identity model on CPU', async () => {
  assert.deepEqual(await probeProvider('cpu'), { provider: 'cpu', ok: true });
});

test('float16: constants are binary16, Cast rounds to it, and Cast\'s VJP brings the gradient back to float32', async () => {
  assert.deepEqual(Array.from(new Uint16Array(floatTensor('float16', [2], [1, -2]).bytes.buffer)), [0x3c00, 0xc000]);
  const g = new Graph();
  const x = g.input('x', [3]);
  const y = g.mul(g.cast(x, 'float16'), g.scalar(3, 'float16')); // float16 (3)
  const loss = g.cast(g.reduceSum(y, [], false), 'float32');
  const dx = gradients(g, loss, [x]).get('x')!;
  assert.equal(dx.dtype, 'float32');
  g.output(g.cast(y, 'float32'), 'y');
  g.output(dx, 'dx');
  g.output(g.cast(g.cast(x, 'float16'), 'float32'), 'rounded');
  const session = await ort.InferenceSession.create(encodeModel(g), { logSeverityLevel: 3 }); // no CPU float16 Mul: ORT warns that it casts
  const out = await session.run({ x: new ort.Tensor('float32', Float32Array.of(1 + 2 ** -13, 2, -0.5), [3]) });
  assert.deepEqual(Array.from(out.rounded!.data as Float32Array), [1, 2, -0.5], '1 + 2⁻¹³ rounds to 1 in float16');
  assert.deepEqual(Array.from(out.y!.data as Float32Array, (v) => Math.round(v * 1e3) / 1e3), [3, 6, -1.5]);
  assert.deepEqual(Array.from(out.dx!.data as Float32Array), [3, 3, 3]);
  await session.release();
});
