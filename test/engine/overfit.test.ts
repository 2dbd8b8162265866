import assert from 'node:assert/strict';
import test from 'node:test';
import { PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { createOptimizer } from '../../src/engine/optim/index.js';
import { OrtBackend } from '../../src/engine/ort-backend.js';
import { Rng } from '../../src/engine/rng.js';
import { syntheticBatch } from '../../src/engine/synthetic.js';
import { trainStep } from '../../src/engine/trainer.js';

test('tiny ALBERT overfits one batch: MLM loss falls from ≈ ln(V) to near zero', async () => {
  const config = PRESETS.tiny;
  const params = initAlbertParams(config, 1);
  const grads = params.zerosLike();
  const batch = syntheticBatch(config, 4, 16, new Rng(5));
  const backend = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1 });
  const optimizer = createOptimizer(params, { kind: 'lamb', lr: 3e-2 });
  const first = await trainStep(backend, optimizer, params, grads, batch, 3e-2);
  assert.ok(Math.abs(first.mlmLoss - Math.log(config.vocabSize)) < 0.5, `initial MLM loss ${first.mlmLoss} should be near ln(${config.vocabSize})`);
  let last = first;
  for (let step = 1; step < 300 && last.mlmLoss > 0.05; step++) last = await trainStep(backend, optimizer, params, grads, batch, 3e-2);
  await backend.close();
  assert.ok(last.mlmLoss < 0.05, `MLM loss after training: ${last.mlmLoss}`);
  assert.equal(last.mlmAccuracy, 1);
});
