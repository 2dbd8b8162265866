import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkConfig, PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { decodeOptimizerState } from '../../src/engine/optim/index.js';
import { createLogger } from '../../src/log/logger.js';
import { NodeController } from '../../src/node/controller.js';
import { DEFAULT_RUN_SETTINGS, type RunSettings } from '../../src/collab/index.js';
import { MODEL_CHECKPOINT, OPTIMIZER_CHECKPOINT } from '../../src/training/session.js';
import { SoloTraining, type SoloTrainingInit } from '../../src/training/solo.js';
import { trainerSettings, type LocalTrainerSettings } from '../../src/training/options.js';
import { METRIC } from '../../src/store/metric-series.js';
import type { TrainingEvent } from '../../src/training/events.js';
import type { Snapshot } from '../../src/shared/api.js';
import { openStore } from '../../src/store/index.js';
import { tmpDir } from '../helpers/tmp.js';

const log = createLogger({ logLevel: 'silent', logFormat: 'json' });

/** Solo training on `dataDir` with the default run settings but short sequences and the given changes. */
function solo(init: Pick<SoloTrainingInit, 'store' | 'dataDir'> & Partial<SoloTrainingInit>, run: Partial<RunSettings>, local: Partial<LocalTrainerSettings>): SoloTraining {
  return new SoloTraining({ log, ...init, trainer: trainerSettings({ ...DEFAULT_RUN_SETTINGS, seqLen: 32, ...run }, local) });
}

/** Starts the runtime and pauses it after `steps` optimizer steps; returns the epochs it reported. */
async function trainSteps(runtime: SoloTraining, steps: number): Promise<number[]> {
  const epochs: number[] = [];
  const done = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${epochs.length} of ${steps} steps within 90 s`)), 90_000);
    const unsubscribe = runtime.subscribe((e: TrainingEvent) => {
      if (e.type !== 'progress') return;
      epochs.push(e.swarm.epoch);
      if (epochs.length === steps) {
        clearTimeout(timer);
        unsubscribe();
        resolve();
      }
    });
  });
  await runtime.start();
  await done;
  await runtime.pause();
  return epochs;
}

test('solo training prepares data on first start, records measured metrics, checkpoints, and resumes where it paused', async (t) => {
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  t.after(() => store.close());
  const make = () => solo({ store, dataDir, prepare: { maxDocuments: 3, vocabSize: 300 } }, {}, { batchSize: 2, checkpointEvery: 2 });

  const first = await trainSteps(make(), 3);
  assert.deepEqual(first.slice(0, 3), [1, 2, 3]);
  const losses = store.metrics.query(METRIC.loss);
  assert.ok(losses.length >= 3 && losses.every((m) => Number.isFinite(m.value) && m.value > 0), 'a finite loss per step');
  const samples = store.metrics.query(METRIC.samples).map((m) => m.value);
  assert.deepEqual(samples.slice(0, 3), [2, 4, 6], 'samples count up by the batch size');
  // alone, a batch is a step: nothing is carried toward the next one, which is one batch away
  assert.ok(store.metrics.query(METRIC.samplesAccumulated).every((m) => m.value === 0));
  const rates = store.metrics.query(METRIC.samplesPerSecond).map((m) => m.value);
  const etas = store.metrics.query(METRIC.etaSeconds).map((m) => m.value);
  assert.ok(etas.length >= 3 && etas.every((eta, i) => Math.abs(eta - 2 / rates[i]!) < 1e-9), 'next step in one batch at the measured rate');
  const stepsTaken = samples.length;
  const model = store.checkpoints.list(MODEL_CHECKPOINT)[0];
  assert.equal(model?.epoch, stepsTaken, 'pausing checkpoints the model at the last step');
  assert.equal(store.checkpoints.list(OPTIMIZER_CHECKPOINT)[0]?.epoch, stepsTaken);
  assert.ok(store.checkpoints.list(MODEL_CHECKPOINT).length <= 3, 'old checkpoints are pruned');

  // a new runtime over the same store (a restarted node) continues the step count and the totals
  const second = await trainSteps(make(), 2);
  assert.equal(second[0], stepsTaken + 1);
  const after = store.metrics.query(METRIC.samples).map((m) => m.value);
  assert.equal(after[stepsTaken], 2 * (stepsTaken + 1), 'contribution totals survive the restart');
});

test('fp16 solo training checkpoints its loss scaler with the optimizer state and resumes from it', async (t) => {
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  t.after(() => store.close());
  const make = () => solo({ store, dataDir, prepare: { maxDocuments: 3, vocabSize: 300 } }, {}, { batchSize: 2, checkpointEvery: 100, precision: 'fp16' });
  const saved = () => {
    const latest = store.checkpoints.list(OPTIMIZER_CHECKPOINT)[0]!;
    const state = decodeOptimizerState(store.checkpoints.load(latest.id).data, initAlbertParams(checkConfig({ ...PRESETS.tiny, vocabSize: 300 }), 0));
    return { epoch: latest.epoch, scaler: state.lossScaler! };
  };
  await trainSteps(make(), 2);
  const first = saved();
  assert.equal(first.scaler.scale * 2 ** first.scaler.skippedSteps, 2 ** 16, 'GradScaler\'s initial scale, halved once per overflow');
  await trainSteps(make(), 2);
  const second = saved();
  assert.ok(second.epoch > first.epoch);
  assert.ok(second.scaler.skippedSteps >= first.scaler.skippedSteps, 'the skipped count carries over');
  // the tiny model does not overflow at 2^16 on CPU: then the finite-step count runs on across the restart
  if (second.scaler.skippedSteps === 0) assert.equal(second.scaler.growthTracker, second.epoch);
});

/** Resolves with the first snapshot whose contribution matches, or rejects after 90 s. */
function contributionWhere(controller: NodeController, match: (s: Snapshot) => boolean): Promise<Snapshot> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no matching contribution status within 90 s')), 90_000);
    const unsubscribe = controller.subscribe((s) => {
      if (!match(s)) return;
      clearTimeout(timer);
      unsubscribe();
      resolve(s);
    });
  });
}

test('the memory limit: Start refuses a model that cannot fit, saying what it needs; the watchdog pauses training that stays over the limit', async (t) => {
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  t.after(() => store.close());
  const prepare = { maxDocuments: 3, vocabSize: 300 };

  // base ALBERT needs far more than 512 MiB even one sample at a time: it never starts
  const base = solo({ store, dataDir, prepare }, { preset: 'base' }, { batchSize: 2 });
  const refusing = new NodeController({ store, log, version: '0', training: base, refreshMs: 60_000 });
  t.after(() => refusing.close());
  assert.ok((await refusing.updateSettings({ policies: { maxMemoryMiB: 512 } })).ok);
  const refused = contributionWhere(refusing, (s) => s.contribution.phase === 'halted');
  await refusing.startContribution();
  const { contribution } = await refused;
  assert.match(contribution.detail, /^halted: memory limit — needs about \d+ MiB; memory limit is 512 MiB — raise it in Settings$/);
  assert.equal(store.metrics.query(METRIC.samples).length, 0, 'nothing was trained');
  await refusing.close();

  // tiny fits, but this process "stays" over the limit: the watchdog stops it, and only Start resumes
  const tiny = solo({ store, dataDir, prepare, memoryProbe: { rssBytes: () => 8 * 2 ** 30 }, watchdogIntervalMs: 10 }, {}, { batchSize: 2 });
  const guarded = new NodeController({ store, log, version: '0', training: tiny, refreshMs: 60_000 });
  t.after(() => guarded.close());
  await guarded.startContribution();
  assert.equal((await guarded.getSnapshot()).contribution.phase, 'running');
  const paused = await contributionWhere(guarded, (s) => s.contribution.phase === 'halted');
  assert.match(paused.contribution.detail, /^halted: memory limit — memory use 8\.0 GiB stayed over the 512 MiB limit/);
  assert.equal((await guarded.getSettings()).policies.maxMemoryMiB, 512, 'the limit is the stored setting');
});

test('solo training skips non-finite steps, reports each, halts with the reason after maxBadSteps in a row, and checkpoints no broken weights', async (t) => {
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  t.after(() => store.close());
  // an absurd learning rate blows the weights up at the first step: every later loss is NaN
  const runtime = solo({ store, dataDir, prepare: { maxDocuments: 3, vocabSize: 300 } }, { peakLr: 1e30, warmupSteps: 0 }, { batchSize: 2, maxBadSteps: 3, checkpointEvery: 1000 });
  const events: TrainingEvent[] = [];
  const halted = new Promise<Extract<TrainingEvent, { type: 'halted' }>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no halt within 90 s: ${JSON.stringify(events.map((e) => e.type))}`)), 90_000);
    runtime.subscribe((e) => {
      events.push(e);
      if (e.type !== 'halted') return;
      clearTimeout(timer);
      resolve(e);
    });
  });
  await runtime.start();
  const halt = await halted;
  assert.equal(halt.cause, 'error');
  assert.match(halt.reason, /the last 3 steps had a non-finite loss or gradient \(each skipped\)/);
  const skipped = events.filter((e) => e.type === 'skipped');
  // the third ends training: the halt reports it
  assert.deepEqual(skipped.map((e) => e.total), [1, 2], 'each skipped step is reported with the running count');
  assert.equal(events.filter((e) => e.type === 'stepped').length, 1, 'only the first step applied');
  assert.equal(store.checkpoints.list(MODEL_CHECKPOINT).length, 0, 'the broken weights were not checkpointed');
});
