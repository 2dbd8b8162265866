import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeTrainingState, encodeTrainingState } from '../../src/collab/state.js';
import { checkConfig, createOptimizer, initAlbertParams, PRESETS } from '../../src/engine/index.js';

const config = checkConfig({ ...PRESETS.tiny, vocabSize: 64 });

test('an fp16 state download carries parameters and first moments as fp16 (8 of 12 bytes per parameter); values beyond fp16 stay fp32, never Inf; second moments stay exact', () => {
  const params = initAlbertParams(config, 3);
  const optimizer = createOptimizer(params, { kind: 'lamb', lr: 1e-3 });
  const base = optimizer.exportState();
  const expAvg = base.expAvg.zerosLike();
  const expAvgSq = base.expAvgSq.zerosLike();
  expAvg.data.forEach((_, i) => (expAvg.data[i] = Math.sin(i) * 1e-2));
  // second moments far below fp16's smallest value: flushed to 0 they would blow up LAMB's step
  expAvgSq.data.forEach((_, i) => (expAvgSq.data[i] = 1e-12 * (1 + (i % 7))));
  const [big] = params.specs;
  expAvg.view(big!.name)[0] = 1e6; // a moment that overflows fp16: its tensor must stay fp32
  const state = { epoch: 4, config, params, optimizer: { ...base, step: 9, expAvg, expAvgSq } };

  const full = encodeTrainingState(state);
  const half = encodeTrainingState(state, { fp16: true });
  const ratio = half.byteLength / full.byteLength;
  assert.ok(ratio < 0.7 && ratio > 0.6, `fp16 state is ${ratio.toFixed(3)} of the fp32 one (expected ≈ 8/12)`);

  const got = decodeTrainingState(half, 'test');
  assert.equal(got.epoch, 4);
  let paramErr = 0;
  got.params.data.forEach((v, i) => (paramErr = Math.max(paramErr, Math.abs(v - params.data[i]!) / Math.max(Math.abs(params.data[i]!), 1e-4))));
  assert.ok(paramErr <= 1e-3, `parameters within fp16's relative precision (got ${paramErr})`);
  const m = got.optimizer!.expAvg;
  assert.ok(m.data.every(Number.isFinite), 'no moment became Inf');
  assert.deepEqual(m.view(big!.name), expAvg.view(big!.name), 'the tensor holding 1e6 travelled as fp32, exactly');
  const other = params.specs[1]!.name;
  assert.ok(m.view(other).some((v, i) => v !== expAvg.view(other)[i]), 'other first-moment tensors travelled as fp16');
  assert.deepEqual(got.optimizer!.expAvgSq.data, expAvgSq.data, 'second moments are exact');
  assert.equal(got.optimizer!.step, 9);
});
