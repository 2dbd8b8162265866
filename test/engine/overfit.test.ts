import assert from 'node:assert/strict';
import test from 'node:test';
import { PRESETS } from '../../src/engine/albert/config.js';
import type { Precision } from '../../src/engine/albert/graph.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { DynamicLossScaler } from '../../src/engine/loss-scaler.js';
import { createOptimizer } from '../../src/engine/optim/index.js';
import { OrtBackend } from '../../src/engine/ort-backend.js';
import { Rng } from '../../src/engine/rng.js';
import { syntheticBatch } from '../../src/engine/synthetic.js';
import { trainStep } from '../../src/engine/trainer.js';

/** LAMB on one batch of the tiny preset until MLM loss < 0.05 or 300 steps (fp16: with GradScaler defaults). */
async function overfit(precision: Precision) {
  const config = PRESETS.tiny;
  const params = initAlbertParams(config, 1);
  const grads = params.zerosLike();
  const batch = syntheticBatch(config, 4, 16, new Rng(5));
  const backend = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1, precision });
  const optimizer = createOptimizer(params, { kind: 'lamb', lr: 3e-2 });
  const scaler = precision === 'fp16' ? new DynamicLossScaler() : undefined;
  const step = () => trainStep(backend, optimizer, params, grads, batch, 3e-2, 1, scaler);
  const first = await step();
  let last = first;
  for (let i = 1; i < 300 && (last.skipped || last.mlmLoss > 0.05); i++) last = await step();
  await backend.close();
  return { first, last, skipped: scaler?.skippedSteps ?? 0, applied: optimizer.stepCount };
}

test('tiny ALBERT overfits one batch: MLM loss falls from ≈ ln(V) to near zero', async () => {
  const { first, last } = await overfit('fp32');
  assert.ok(Math.abs(first.mlmLoss - Math.log(PRESETS.tiny.vocabSize)) < 0.5, `initial MLM loss ${first.mlmLoss} should be near ln(${PRESETS.tiny.vocabSize})`);
  assert.ok(last.mlmLoss < 0.05, `MLM loss after training: ${last.mlmLoss}`);
  assert.equal(last.mlmAccuracy, 1);
});

test('the same with fp16 mixed precision and dynamic loss scaling', async () => {
  const { first, last, skipped, applied } = await overfit('fp16');
  assert.ok(Math.abs(first.mlmLoss - Math.log(PRESETS.tiny.vocabSize)) < 0.5, `initial MLM loss ${first.mlmLoss}`);
  assert.ok(last.mlmLoss < 0.05, `MLM loss after ${applied} fp16 steps (${skipped} skipped): ${last.mlmLoss}`);
  assert.equal(last.mlmAccuracy, 1);
  // overflows are rare once the scale has settled (on CPU ORT computes part of the float16 graph in float32)
  assert.ok(skipped <= applied / 4, `${skipped} of ${applied + skipped} steps skipped`);
});
