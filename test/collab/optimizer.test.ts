// CollaborativeOptimizer options on in-process swarm nodes with synthetic gradients (no engine):
// average_state_every re-converges peers whose parameters differ; use_local_updates steps every
// micro-batch and relies on state averaging.
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { pino } from 'pino';
import { CollaborativeOptimizer, type CollaborativeOptions, type StepOutcome } from '../../src/collab/optimizer.js';
import { checkConfig, PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { createOptimizer, type Optimizer } from '../../src/engine/optim/index.js';
import type { ParameterSet } from '../../src/engine/params.js';
import { maxAbsDiff, randomVector } from '../averaging/helpers.js';
import { startSwarm } from '../helpers/swarm.js';

const config = checkConfig({ ...PRESETS.tiny, vocabSize: 64 });
const BASE: CollaborativeOptions = { targetBatchSize: 32, matchmakingTime: 2, averagingTimeout: 10, maxRefresh: 1, peakLr: 0.01, warmupSteps: 1, totalSteps: 1000 };

interface Peer {
  readonly params: ParameterSet;
  readonly optimizer: Optimizer;
  readonly collab: CollaborativeOptimizer;
  readonly grads: ParameterSet;
}

async function peers(t: TestContext, runId: string, seeds: readonly number[], options: Partial<CollaborativeOptions>): Promise<Peer[]> {
  const nodes = await startSwarm(t, seeds.length, { runId });
  return Promise.all(
    nodes.map(async (node, i) => {
      const params = initAlbertParams(config, seeds[i]!);
      const optimizer = createOptimizer(params, { kind: 'lamb' });
      const collab = new CollaborativeOptimizer(node, config, params, optimizer, { ...BASE, ...options }, pino({ level: 'silent' }));
      t.after(() => collab.stop());
      await collab.start();
      // each peer's own gradient direction, so local steps move the peers apart
      const grads = params.zerosLike();
      grads.data.set(randomVector(grads.size, 100 + i, 0.01));
      return { params, optimizer, collab, grads };
    }),
  );
}

/** Feeds 4-sample micro-batches (1 s each by the clock the optimizer is told) until the peer steps to epoch 1. */
async function trainOneEpoch(p: Peer): Promise<Extract<StepOutcome, { type: 'stepped' }>> {
  for (let i = 0; i < 400; i++) {
    const outcome = await p.collab.step(p.grads, 4, 1, 1);
    if (outcome.type === 'stepped') return outcome;
    assert.equal(outcome.type, 'accumulated');
    await new Promise((r) => setTimeout(r, 40));
  }
  throw new Error('no step within 400 micro-batches');
}

test('average_state_every: peers that start from different weights hold the same parameters after the state-averaging round', { timeout: 60_000 }, async (t) => {
  const [a, b] = await peers(t, 'opt-state-avg', [1, 2], { averageStateEvery: 1 });
  assert.ok(maxAbsDiff(a!.params.data, b!.params.data) > 0.01, 'the initial weights differ');
  const [sa, sb] = await Promise.all([trainOneEpoch(a!), trainOneEpoch(b!)]);
  for (const s of [sa!, sb!]) {
    assert.equal(s.epoch, 1);
    assert.equal(s.averagedWith, 2, 'gradients were averaged');
    assert.deepEqual(s.stateAveraging, { averagedWith: 2 });
  }
  assert.ok(maxAbsDiff(a!.params.data, b!.params.data) <= 1e-6, `parameters differ by ${maxAbsDiff(a!.params.data, b!.params.data)}`);
});

test('use_local_updates: every micro-batch steps locally, so peers drift apart; state averaging (fp16, with optimizer statistics) brings them together', { timeout: 60_000 }, async (t) => {
  const [a, b] = await peers(t, 'opt-local', [1, 1], { useLocalUpdates: true, stateAveragingCompression: 'fp16', averageOptStatistics: true });
  const initial = a!.params.data.slice();
  assert.deepEqual(b!.params.data, initial, 'same seed, same weights');
  // one micro-batch each: with local updates it is an optimizer step of its own gradient at once
  for (const p of [a!, b!]) assert.equal((await p.collab.step(p.grads, 4, 1, 1)).type, 'accumulated');
  assert.equal(a!.optimizer.stepCount, 1);
  assert.ok(maxAbsDiff(a!.params.data, initial) > 0, 'the local step moved the parameters');
  assert.ok(maxAbsDiff(a!.params.data, b!.params.data) > 1e-4, 'different gradients: the peers diverged');
  const [sa, sb] = await Promise.all([trainOneEpoch(a!), trainOneEpoch(b!)]);
  for (const s of [sa!, sb!]) {
    assert.equal(s.epoch, 1);
    assert.equal(s.averagedWith, 1, 'no gradient averaging');
    assert.equal(s.reason, undefined);
    assert.deepEqual(s.stateAveraging, { averagedWith: 2 }, 'use_local_updates averages state every epoch by default');
  }
  // fp16 on the wire: equal within half precision of values of this size
  const scale = Math.max(...a!.params.data.map(Math.abs));
  assert.ok(maxAbsDiff(a!.params.data, b!.params.data) <= scale * 1e-3, `parameters differ by ${maxAbsDiff(a!.params.data, b!.params.data)}`);
  const [ma, mb] = [a!.optimizer.exportState(), b!.optimizer.exportState()];
  const mScale = Math.max(...ma.expAvg.data.map(Math.abs));
  assert.ok(mScale > 0 && maxAbsDiff(ma.expAvg.data, mb.expAvg.data) <= mScale * 1e-3, 'first moments averaged');
  assert.ok(ma.expAvgSq.data.every((v) => v >= 0), 'second moments stay non-negative');
  assert.ok(a!.optimizer.stepCount > 1 && b!.optimizer.stepCount > 1, 'each peer kept stepping on its own micro-batches');
});
