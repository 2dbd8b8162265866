import assert from 'node:assert/strict';
import test from 'node:test';
import { PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { DynamicLossScaler, LOSS_SCALER_DEFAULTS, LossScaleError } from '../../src/engine/loss-scaler.js';
import { createOptimizer } from '../../src/engine/optim/index.js';
import { OrtBackend } from '../../src/engine/ort-backend.js';
import { Rng } from '../../src/engine/rng.js';
import { syntheticBatch } from '../../src/engine/synthetic.js';
import { trainStep } from '../../src/engine/trainer.js';

test('GradScaler defaults: 2^16, ×2 every 2000 finite steps, ×0.5 on overflow', () => {
  assert.deepEqual(LOSS_SCALER_DEFAULTS, { initScale: 65536, growthFactor: 2, backoffFactor: 0.5, growthInterval: 2000 });
  assert.equal(new DynamicLossScaler().scale, 65536);
});

test('the scale grows after growthInterval consecutive finite steps; an overflow backs off and restarts the count', () => {
  const s = new DynamicLossScaler({ initScale: 1024, growthInterval: 3 });
  assert.equal(s.update(true), true);
  assert.equal(s.update(true), true);
  assert.equal(s.scale, 1024);
  assert.equal(s.update(true), true);
  assert.equal(s.scale, 2048, 'grown after 3 finite steps');
  assert.equal(s.update(true), true);
  assert.equal(s.update(true), true);
  assert.equal(s.update(false), false, 'an overflow skips the step');
  assert.equal(s.scale, 1024);
  assert.equal(s.skippedSteps, 1);
  s.update(true);
  s.update(true);
  assert.equal(s.scale, 1024, 'the overflow reset the count');
  s.update(true);
  assert.equal(s.scale, 2048);
});

test('state round-trips through export/import; a bad field is named', () => {
  const s = new DynamicLossScaler({ initScale: 256, growthInterval: 5 });
  s.update(true);
  s.update(false);
  s.update(true);
  const restored = new DynamicLossScaler();
  restored.importState(s.exportState());
  assert.deepEqual(restored.exportState(), { scale: 128, growthFactor: 2, backoffFactor: 0.5, growthInterval: 5, growthTracker: 1, skippedSteps: 1 });
  assert.throws(() => restored.importState({ ...s.exportState(), scale: Number.NaN }), (e: Error) => e instanceof LossScaleError && /loss scaler scale null is invalid/.test(e.message));
  assert.throws(() => restored.importState({ ...s.exportState(), growthTracker: 5 }), /growthTracker 5 is invalid; accepted: an integer from 0 to growthInterval − 1/);
  assert.throws(() => new DynamicLossScaler({ backoffFactor: 1 }), /backoffFactor 1 is invalid/);
  assert.equal(restored.scale, 128, 'a rejected import leaves the state as it was');
});

test('non-finite gradients at a tiny scale are not an overflow: update throws instead of skipping forever', () => {
  const s = new DynamicLossScaler({ initScale: 2 ** -23 });
  assert.equal(s.update(false), false);
  assert.throws(() => s.update(false), /not finite even at loss scale 5\.96\d*e-8: not an fp16 overflow/);
});

test('fp16 training with an absurd initial scale: overflowing steps are skipped untouched until the scale fits', async () => {
  const config = PRESETS.tiny;
  const params = initAlbertParams(config, 1);
  const before = params.data.slice();
  const grads = params.zerosLike();
  const batch = syntheticBatch(config, 2, 8, new Rng(5));
  const backend = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1, precision: 'fp16' });
  const optimizer = createOptimizer(params, { kind: 'lamb', lr: 1e-3 });
  const scaler = new DynamicLossScaler({ initScale: 2 ** 40 });
  try {
    const first = await trainStep(backend, optimizer, params, grads, batch, 1e-3, 1, scaler);
    assert.equal(first.skipped, 'overflow');
    assert.ok(Number.isNaN(first.gradNorm));
    assert.deepEqual(params.data, before, 'a skipped step leaves the weights unchanged');
    assert.equal(optimizer.stepCount, 0, 'and the optimizer untouched');
    assert.equal(scaler.scale, 2 ** 39);
    let steps = 1;
    let last = first;
    while (last.skipped && steps < 40) {
      last = await trainStep(backend, optimizer, params, grads, batch, 1e-3, 1, scaler);
      steps++;
    }
    assert.equal(last.skipped, false, `still overflowing at scale ${scaler.scale}`);
    assert.equal(scaler.skippedSteps, steps - 1);
    assert.equal(scaler.scale, 2 ** (40 - scaler.skippedSteps));
    assert.ok(scaler.scale <= 2 ** 24 && scaler.scale >= 1, `settled at ${scaler.scale}`);
    assert.equal(optimizer.stepCount, 1);
    assert.ok(Number.isFinite(last.gradNorm) && last.gradNorm > 0);
    assert.notDeepEqual(params.data, before, 'the first finite step updates the weights');
  } finally {
    await backend.close();
  }
});

test('fp32 training: a step whose loss and gradients are not finite is skipped untouched, the next finite one applies', async () => {
  const config = PRESETS.tiny;
  const params = initAlbertParams(config, 1);
  const grads = params.zerosLike();
  const batch = syntheticBatch(config, 2, 8, new Rng(5));
  const backend = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1 });
  const optimizer = createOptimizer(params, { kind: 'lamb', lr: 1e-3 });
  const first = params.specs[0]!;
  const good = params.data[first.offset]!;
  params.data[first.offset] = Number.NaN; // one poisoned weight makes the loss and every gradient reaching it NaN
  const poisoned = params.data.slice();
  try {
    const bad = await trainStep(backend, optimizer, params, grads, batch, 1e-3);
    assert.equal(bad.skipped, 'non-finite');
    assert.ok(Number.isNaN(bad.gradNorm));
    assert.deepEqual(params.data, poisoned, 'the weights are untouched');
    assert.equal(optimizer.stepCount, 0, 'and the optimizer too');
    params.data[first.offset] = good;
    const next = await trainStep(backend, optimizer, params, grads, batch, 1e-3);
    assert.equal(next.skipped, false);
    assert.ok(Number.isFinite(next.loss) && Number.isFinite(next.gradNorm));
    assert.equal(optimizer.stepCount, 1);
  } finally {
    await backend.close();
  }
});
