import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { checkConfig, PRESETS, type AlbertConfig } from '../../src/engine/albert/config.js';
import { estimateTrainingMemory, parameterCount, planMicroBatch, type TrainingShape } from '../../src/engine/memory-estimate.js';
import { ROOT } from '../helpers/cli.js';

const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'measure-training-memory.ts');
const run = promisify(execFile);

/** Peak RSS growth of real training steps + a checkpoint's encoding, measured in a fresh process. */
async function measuredPeakDelta(preset: string, batchSize: number, seqLen: number): Promise<number> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', FIXTURE, preset, String(batchSize), String(seqLen), 'fp32', '2'], { cwd: ROOT, timeout: 120_000 });
  const m = JSON.parse(stdout.trim().split('\n').pop()!) as { baselineBytes: number; peakBytes: number };
  return m.peakBytes - m.baselineBytes;
}

const shape = (batchSize: number, seqLen = 128): TrainingShape => ({ batchSize, seqLen, precision: 'fp32', trainer: 'local' });
const withoutBaseline = (config: AlbertConfig, s: TrainingShape) => {
  const e = estimateTrainingMemory(config, s);
  return e.totalBytes - e.baselineBytes;
};

test('the estimate is within 0.6–1.6× of the measured peak of real training steps (tiny, two shapes)', async () => {
  for (const [b, s] of [
    [4, 128],
    [16, 64],
  ] as const) {
    const measured = await measuredPeakDelta('tiny', b, s);
    const estimated = withoutBaseline(PRESETS.tiny, shape(b, s));
    const ratio = estimated / measured;
    assert.ok(ratio >= 0.6 && ratio <= 1.6, `tiny ${b}×${s}: estimated ${(estimated / 1e6).toFixed(0)} MB, measured ${(measured / 1e6).toFixed(0)} MB (ratio ${ratio.toFixed(2)})`);
  }
});

test('the estimate grows with the micro-batch, the sequence length and the model', () => {
  for (const config of [PRESETS.tiny, PRESETS.base]) {
    const byBatch = [1, 2, 4, 8, 32].map((b) => estimateTrainingMemory(config, shape(b)).totalBytes);
    assert.ok(byBatch.every((v, i) => i === 0 || v > byBatch[i - 1]!), `increasing in B: ${byBatch.join(', ')}`);
    const bySeq = [16, 64, 128, 512].map((s) => estimateTrainingMemory(config, shape(4, s)).totalBytes);
    assert.ok(bySeq.every((v, i) => i === 0 || v > bySeq[i - 1]!), `increasing in S: ${bySeq.join(', ')}`);
  }
  const models = [PRESETS.tiny, checkConfig({ ...PRESETS.tiny, hiddenSize: 128, intermediateSize: 512 }), PRESETS.base, PRESETS.large].map((c) => estimateTrainingMemory(c, shape(4)).totalBytes);
  assert.ok(models.every((v, i) => i === 0 || v > models[i - 1]!), `increasing with the model: ${models.join(', ')}`);
  // a swarm peer keeps more parameter-sized buffers than training alone, and fp16 adds weight copies
  assert.ok(estimateTrainingMemory(PRESETS.base, { ...shape(4), trainer: 'swarm' }).totalBytes > estimateTrainingMemory(PRESETS.base, shape(4)).totalBytes);
  assert.ok(estimateTrainingMemory(PRESETS.base, { ...shape(4), precision: 'fp16' }).totalBytes > estimateTrainingMemory(PRESETS.base, shape(4)).totalBytes);
  // delay_optimizer_step's compute copy: one more float32 parameter buffer
  const swarm = estimateTrainingMemory(PRESETS.base, { ...shape(4), trainer: 'swarm' }).totalBytes;
  assert.equal(estimateTrainingMemory(PRESETS.base, { ...shape(4), trainer: 'swarm', delayOptimizerStep: true }).totalBytes - swarm, 4 * parameterCount(PRESETS.base));
  assert.throws(() => estimateTrainingMemory(PRESETS.tiny, shape(0)), /batch size 0/);
});

test('the plan takes the largest micro-batch that fits, and refuses with the need and the limit when one sample does not', () => {
  const config = PRESETS.base;
  const total = (b: number) => estimateTrainingMemory(config, shape(b)).totalBytes;
  // room for exactly 2 samples
  const between = (total(2) + total(3)) / 2;
  const plan = planMicroBatch(config, shape(8), between);
  assert.ok(plan.fits);
  assert.equal(plan.batchSize, 2);
  assert.ok(plan.estimate.totalBytes <= between);
  const roomy = planMicroBatch(config, shape(8), total(8) + 1);
  assert.ok(roomy.fits && roomy.batchSize === 8, 'the configured micro-batch when it fits');
  const tight = planMicroBatch(config, shape(8), 512 * 2 ** 20);
  assert.ok(!tight.fits);
  assert.equal(tight.estimate.totalBytes, total(1));
  assert.match(tight.reason, /^needs about \d+ MiB; memory limit is 512 MiB — raise it in Settings$/);
});
