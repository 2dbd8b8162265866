// DiLoCo's outer step against PyTorch's SGD(lr, momentum=μ, nesterov=True) written out for one value:
// b ← μ·b + Δ; θ_start ← θ_start − lr·(Δ + μ·b); with the one-step-delayed update the inner steps taken
// since the pseudo-gradient was sent stay on top of the new θ_start. The swarm tests compare peers
// running this same code (or μ = 0), so only this test sees the momentum terms.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OuterNesterov } from '../../src/collab/outer-optimizer.js';
import { ParameterSet } from '../../src/engine/params.js';

const LR = 0.7;
const MU = 0.9;

const params = (values: number[]): ParameterSet => ParameterSet.wrap([{ name: 'w', shape: [values.length] }], Float32Array.from(values));
const close = (actual: ArrayLike<number>, expected: number[], what: string): void => {
  for (let i = 0; i < expected.length; i++) assert.ok(Math.abs(actual[i]! - expected[i]!) <= 1e-6, `${what}[${i}]: ${actual[i]} ≠ ${expected[i]}`);
};

test('outer Nesterov SGD: two steps with momentum give PyTorch SGD(nesterov=True)’s θ_start and buffer; θ becomes θ_start', () => {
  const theta = params([1, -2]);
  const outer = new OuterNesterov(theta, LR, MU);
  // round 1: Δ = (0.1, −0.2); b = Δ; θ_start = θ_start − lr·(Δ + μ·Δ)
  outer.step(Float32Array.of(0.1, -0.2), theta);
  close(outer.momentum.data, [0.1, -0.2], 'b after round 1');
  close(outer.start.data, [1 - LR * (0.1 + MU * 0.1), -2 - LR * (-0.2 + MU * -0.2)], 'θ_start after round 1');
  assert.deepEqual(theta.data, outer.start.data, 'θ is the new θ_start');
  // round 2: Δ = (0.3, 0.05); b = μ·b + Δ
  const s1 = Array.from(outer.start.data);
  const b2 = [MU * 0.1 + 0.3, MU * -0.2 + 0.05];
  outer.step(Float32Array.of(0.3, 0.05), theta);
  close(outer.momentum.data, b2, 'b after round 2');
  close(outer.start.data, [s1[0]! - LR * (0.3 + MU * b2[0]!), s1[1]! - LR * (0.05 + MU * b2[1]!)], 'θ_start after round 2');
});

test('outer Nesterov SGD, one step delayed: the inner progress since the pseudo-gradient was sent is re-based on the new θ_start', () => {
  const theta = params([1, -2]);
  const outer = new OuterNesterov(theta, LR, MU);
  theta.data.set([0.9, -1.8]); // the inner steps of the round: θ_sent
  const sent = outer.pseudoGradient(theta, new Float32Array(2));
  close(sent, [0.1, -0.2], 'Δ = θ_start − θ_sent');
  theta.data.set([0.85, -1.7]); // inner steps taken while the round was in flight
  outer.step(Float32Array.of(0.2, -0.1), theta, sent);
  const start = [1 - LR * (0.2 + MU * 0.2), -2 - LR * (-0.1 + MU * -0.1)];
  close(outer.start.data, start, 'θ_start');
  close(theta.data, [start[0]! + (0.85 - 0.9), start[1]! + (-1.7 - -1.8)], 'θ = θ_start + (θ − θ_sent)');
});
