// delay_optimizer_step on in-process swarm nodes with a quadratic loss (no engine): the micro-batch
// after an epoch's end is computed on the parameters before its step, the master after the step is
// exactly a plain LAMB step on that epoch's gradient at that epoch's rate, a state load drops a
// pending step, and state averaging averages the stepped parameters.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { DelayedStep } from '../../src/collab/delayed-step.js';
import { CollaborativeOptimizer, type StepOutcome } from '../../src/collab/optimizer.js';
import type { CollaborativeOptions } from '../../src/collab/options.js';
import { checkConfig, PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { clipGradNorm, createOptimizer, GradientAccumulator, linearWarmupDecay } from '../../src/engine/optim/index.js';
import type { ParameterSet } from '../../src/engine/params.js';
import type { SwarmNode } from '../../src/swarm/index.js';
import { maxAbsDiff, randomVector } from '../averaging/helpers.js';
import { startSwarm } from '../helpers/swarm.js';

const config = checkConfig({ ...PRESETS.tiny, vocabSize: 64 });
// alone in its averaging group, the peer fails matchmaking quickly and steps on its own gradient
// (deterministic); warmup makes every epoch's rate different, so a step at the wrong rate shows
const SCHEDULE = { peakLr: 0.05, warmupSteps: 4, totalSteps: 100 };
const OPTIONS: CollaborativeOptions = { targetBatchSize: 8, matchmakingTime: 0.3, averagingTimeout: 5, maxRefresh: 1, delayOptimizerStep: true, ...SCHEDULE };
const SAMPLES = 4;

function collabOn(node: SwarmNode, params: ParameterSet, options: Partial<CollaborativeOptions> = {}) {
  const optimizer = createOptimizer(params, { kind: 'lamb' });
  return { optimizer, collab: new CollaborativeOptimizer(node, config, params, optimizer, { ...OPTIONS, ...options }, pino({ level: 'silent' })) };
}

/** Gradient of ½‖p − target‖² at `p`, into `into`. */
function gradient(p: Float32Array, target: Float32Array, into: ParameterSet): ParameterSet {
  into.data.set(p.map((x, j) => x - target[j]!));
  return into;
}

test('DelayedStep: off, one buffer and steps at once; on, the work sees the compute copy before the step and the next work after it; discard, changes, a failing step', async () => {
  const off = new DelayedStep(initAlbertParams(config, 1), false);
  let taken = 0;
  off.defer(() => taken++);
  assert.equal(taken, 1, 'without the delay a step is taken at once');
  assert.equal(off.isPending, false);

  const master = initAlbertParams(config, 1);
  const on = new DelayedStep(master, true);
  assert.notEqual(on.compute.data, master.data);
  const before = master.data.slice();
  on.defer(() => master.data.fill(1));
  assert.throws(() => on.defer(() => {}), /already pending/);
  const seen = await on.overlap(async (p) => {
    await new Promise((r) => setTimeout(r, 5)); // the step is taken while this work is still running
    return { during: p.data.slice(), master: master.data.slice() };
  });
  assert.deepEqual(seen.during, before, 'the work ran on the parameters before the step');
  assert.ok(seen.master.every((x) => x === 1), 'the step was taken on the master while the work ran');
  assert.deepEqual(on.compute.data, before, 'the compute copy is not touched after the work either');
  assert.ok((await on.overlap(async (p) => p.data.slice())).every((x) => x === 1), 'the next work sees the step');

  on.defer(() => master.data.fill(2));
  on.discard();
  master.data.fill(3); // e.g. a state load replaced the master
  assert.ok((await on.overlap(async (p) => p.data.slice())).every((x) => x === 3), 'a discarded step is never taken; the new master is published');

  on.defer(() => {
    throw new Error('gradient is not finite');
  });
  let settled = false;
  await assert.rejects(
    on.overlap(async () => {
      await new Promise((r) => setTimeout(r, 5));
      settled = true;
    }),
    /not finite/,
  );
  assert.ok(settled, 'the step’s error is reported once the work has finished with the compute copy');
});

test('delay_optimizer_step: the micro-batch after an epoch ends runs on the parameters before its step; the master then equals a plain LAMB step at that epoch’s rate', { timeout: 60_000 }, async (t) => {
  const [node] = await startSwarm(t, 2, { runId: 'delay-step-exact' });
  const params = initAlbertParams(config, 1);
  const { optimizer, collab } = collabOn(node!, params);
  t.after(() => collab.stop());
  await collab.start();
  assert.notEqual(collab.computeParams, params, 'micro-batches are computed on a separate copy');
  const target = randomVector(params.size, 9, 0.05);
  const grads = params.zerosLike();

  // the loop of runPeer: compute on the copy (the pending step taken meanwhile), then hand in the gradient
  const seen: Array<{ computedOn: Float32Array; masterAfter: Float32Array; outcome: StepOutcome }> = [];
  for (let k = 0; k < 4; k++) {
    const computedOn = await collab.computeWhileStepping(async (p) => {
      gradient(p.data, target, grads);
      return p.data.slice();
    });
    const masterAfter = params.data.slice();
    seen.push({ computedOn, masterAfter, outcome: await collab.step(grads, SAMPLES, 1, 1) });
  }
  assert.deepEqual(seen.map((s) => s.outcome.type), ['accumulated', 'stepped', 'accumulated', 'stepped']);
  for (const k of [1, 3]) {
    const o = seen[k]!.outcome as Extract<StepOutcome, { type: 'stepped' }>;
    assert.equal(o.epoch, (k + 1) / 2);
    assert.equal(o.pending, true, 'the step is left for the next micro-batch');
  }
  assert.equal(optimizer.stepCount, 1, 'epoch 2’s step is still pending');
  await collab.flush();
  assert.equal(optimizer.stepCount, 2, 'flush takes the pending step');

  // by hand: LAMB on the clipped mean gradient of each epoch, at lr(epoch)
  const lr1 = linearWarmupDecay(1, SCHEDULE);
  const lr2 = linearWarmupDecay(2, SCHEDULE);
  assert.notEqual(lr1, lr2);
  const ref = initAlbertParams(config, 1);
  const p0 = ref.data.slice();
  const refOpt = createOptimizer(ref, { kind: 'lamb' });
  const acc = new GradientAccumulator(ref);
  const g = ref.zerosLike();
  const epochStep = (gradsOn: Float32Array[], lr: number): void => {
    acc.reset();
    for (const p of gradsOn) acc.add(gradient(p, target, g), SAMPLES);
    const avg = acc.average();
    clipGradNorm(avg, 1);
    refOpt.step(ref, avg, lr);
  };
  epochStep([p0, p0], lr1);
  const p1 = ref.data.slice();
  // micro-batch 3 still sees p0 (one micro-batch of staleness), micro-batch 4 sees p1
  epochStep([p0, p1], lr2);

  assert.deepEqual(seen[0]!.computedOn, p0);
  assert.deepEqual(seen[1]!.computedOn, p0);
  assert.deepEqual(seen[1]!.masterAfter, p0, 'no step before the epoch ends');
  assert.deepEqual(seen[2]!.computedOn, p0, 'the micro-batch after the epoch ended ran on the parameters before its step');
  assert.deepEqual(seen[2]!.masterAfter, p1, 'its step was taken on the master meanwhile, exactly a plain LAMB step at lr(1)');
  assert.deepEqual(seen[3]!.computedOn, p1, 'the next micro-batch runs on the updated parameters');
  assert.deepEqual(params.data, ref.data, 'epoch 2’s step (at lr(2), on a gradient from the stale and the updated parameters) matches');
});

test('delay_optimizer_step: loading the state from a peer ahead drops the pending step; option checks follow hivemind', { timeout: 60_000 }, async (t) => {
  const [a, b] = await startSwarm(t, 2, { runId: 'delay-step-load' });
  assert.throws(() => collabOn(a!, initAlbertParams(config, 1), { delayGradAveraging: true, delayOptimizerStep: false }), /delay_grad_averaging needs delay_optimizer_step/);
  assert.throws(() => collabOn(a!, initAlbertParams(config, 1), { useLocalUpdates: true }), /delay_optimizer_step is not supported with use_local_updates/);

  const params = initAlbertParams(config, 1);
  const { optimizer, collab } = collabOn(a!, params);
  t.after(() => collab.stop());
  await collab.start();
  const grads = gradient(params.data, randomVector(params.size, 9, 0.05), params.zerosLike());
  // the caller never computes through computeWhileStepping here: the step stays pending until the next step()
  assert.equal((await collab.step(grads, SAMPLES, 1, 1)).type, 'accumulated');
  const stepped = await collab.step(grads, SAMPLES, 1, 1);
  assert.equal(stepped.type === 'stepped' && stepped.pending, true);

  // a peer far ahead, with other weights
  const donorParams = initAlbertParams(config, 2);
  const donor = collabOn(b!, donorParams, { delayOptimizerStep: false });
  t.after(() => donor.collab.stop());
  await donor.collab.start({ epoch: 5 });
  await new Promise((r) => setTimeout(r, 1500)); // past maxRefresh: the next step() fetches the swarm's progress
  // a micro-batch that completes the target batch: a peer about to act waits for that fetch (a peer that
  // is not reads it a micro-batch later, and its loop takes the pending step meanwhile)
  const loaded = await collab.step(grads, 2 * SAMPLES, 1, 1);
  assert.deepEqual(loaded, { type: 'loaded', epoch: 5, donor: b!.peerId.toString() });
  assert.equal(optimizer.stepCount, 0, 'the donor’s optimizer state; the pending step was not taken');
  assert.deepEqual(params.data, donorParams.data);
  // the next micro-batch computes on the loaded parameters and takes no stale step
  const computedOn = await collab.computeWhileStepping(async (p) => p.data.slice());
  assert.deepEqual(computedOn, donorParams.data);
  assert.deepEqual(params.data, donorParams.data);
  assert.equal(await collab.flush(), undefined);
  assert.equal(optimizer.stepCount, 0);
});

test('delay_optimizer_step with average_state_every: the step is taken before the parameters are averaged, not left pending', { timeout: 60_000 }, async (t) => {
  const nodes = await startSwarm(t, 2, { runId: 'delay-step-state-avg' });
  const peers = nodes.map((node, i) => {
    const params = initAlbertParams(config, 1 + i);
    const { optimizer, collab } = collabOn(node, params, { averageStateEvery: 1, matchmakingTime: 2, targetBatchSize: 16 });
    t.after(() => collab.stop());
    return { params, optimizer, collab, grads: gradient(params.data, randomVector(params.size, 20 + i, 0.05), params.zerosLike()) };
  });
  await Promise.all(peers.map((p) => p.collab.start()));
  const stepped = await Promise.all(
    peers.map(async (p) => {
      for (let k = 0; k < 200; k++) {
        const o = await p.collab.step(p.grads, SAMPLES, 1, 1);
        if (o.type === 'stepped') return o;
        await new Promise((r) => setTimeout(r, 40));
      }
      throw new Error('no step within 200 micro-batches');
    }),
  );
  for (const [i, s] of stepped.entries()) {
    assert.deepEqual(s.stateAveraging, { averagedWith: 2 }, `peer ${i}`);
    assert.equal(s.pending, undefined, `peer ${i}: nothing left pending after state averaging`);
    assert.equal(peers[i]!.optimizer.stepCount, 1);
  }
  assert.ok(maxAbsDiff(peers[0]!.params.data, peers[1]!.params.data) <= 1e-6, 'averaged after the step: equal parameters');
});
