import assert from 'node:assert/strict';
import { test } from 'node:test';
import { linearWarmupDecay } from '../../../src/engine/optim/index.js';

const ALBERT = { peakLr: 0.00176, warmupSteps: 5000, totalSteps: 125000 };

test('linear warmup to the peak over 5000 steps, then linear decay to 0 at 125000 (HF get_linear_schedule_with_warmup)', () => {
  const close = (a: number, b: number): void => assert.ok(Math.abs(a - b) <= 1e-12, `${a} vs ${b}`);
  close(linearWarmupDecay(0, ALBERT), 0);
  close(linearWarmupDecay(1, ALBERT), 0.00176 / 5000);
  close(linearWarmupDecay(2500, ALBERT), 0.00088);
  close(linearWarmupDecay(5000, ALBERT), 0.00176);
  close(linearWarmupDecay(65000, ALBERT), 0.00088); // halfway through the 120000 decay steps
  close(linearWarmupDecay(124999, ALBERT), 0.00176 / 120000);
  close(linearWarmupDecay(125000, ALBERT), 0);
  close(linearWarmupDecay(300000, ALBERT), 0); // never negative past the end
  close(linearWarmupDecay(0, { ...ALBERT, warmupSteps: 0 }), 0.00176); // no warmup: starts at the peak
});

test('the schedule rejects nonsense with the field named', () => {
  assert.throws(() => linearWarmupDecay(-1, ALBERT), /step must be .* got -1/);
  assert.throws(() => linearWarmupDecay(Number.NaN, ALBERT), /step must be/);
  assert.throws(() => linearWarmupDecay(1, { ...ALBERT, peakLr: -0.1 }), /peakLr/);
  assert.throws(() => linearWarmupDecay(1, { ...ALBERT, warmupSteps: 2.5 }), /warmupSteps/);
  assert.throws(() => linearWarmupDecay(1, { ...ALBERT, totalSteps: 5000 }), /totalSteps must be an integer > warmupSteps \(5000\); got 5000/);
});
