// DiLoCo's inner batch and its 8-bit round, on in-process swarm nodes with synthetic gradients (no
// engine). innerBatchSize: micro-batches are accumulated (sample-weighted) into one inner step of that
// many samples, so a peer takes the step a peer with micro-batches of that size takes; a round the
// swarm ends between inner steps takes one on what was accumulated. gradCompression blockwise8 and
// blockwise4: the round sends the pseudo-gradient in 8 or 4 bits; every member lands on the same
// parameters, within the quantisation's bound of the exact average. Near a round's end a micro-batch does not wait for a
// progress read (DiLoCo schedules nothing ahead).
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { StepOutcome } from '../../src/collab/optimizer.js';
import type { CollaborativeOptions } from '../../src/collab/options.js';
import { maxAbsDiff, randomVector } from '../averaging/helpers.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { config, trainOneEpoch, unstarted, type Peer } from '../helpers/collab-peer.js';
import { startSwarm } from '../helpers/swarm.js';

/** Started peers on one in-process swarm of `count` nodes, all from the weights of seed 1. */
async function swarm(t: TestContext, runId: string, count: number, options: Partial<CollaborativeOptions>): Promise<Peer[]> {
  const nodes = await startSwarm(t, count, { runId });
  const list = nodes.map((node) => unstarted(t, node, 1, { outerOptimizer: 'diloco', aggregation: 'mean', matchmakingTime: 1, averagingTimeout: 4, ...options }));
  await Promise.all(list.map((p) => p.collab.start()));
  return list;
}

const gradient = (size: number, seed: number): Float32Array => randomVector(size, seed, 0.01);

test('innerBatchSize: a peer with 4-sample micro-batches takes an inner step every 8 samples, the step a peer with 8-sample micro-batches of their mean gradient takes', { timeout: 60_000 }, async (t) => {
  const H = 2;
  const [acc] = await swarm(t, 'diloco-inner-acc', 1, { innerSteps: H, innerBatchSize: 8, targetBatchSize: 1000 });
  const [ref] = await swarm(t, 'diloco-inner-ref', 1, { innerSteps: H, targetBatchSize: 1000 });
  const [g1, g2] = [gradient(acc!.grads.size, 11), gradient(acc!.grads.size, 12)];
  // the micro-batches of each inner step: g1 then g2 (4 samples each); the reference's one micro-batch: their mean (8 samples)
  const mean = g1.map((x, i) => (x + g2[i]!) / 2);
  for (let step = 1; step <= H; step++) {
    acc!.grads.data.set(g1);
    const first = await acc!.collab.step(acc!.grads, 4, 1, 1);
    assert.equal(first.type, 'accumulated');
    assert.equal(acc!.optimizer.stepCount, step - 1, `4 of 8 samples: no inner step yet (inner step ${step})`);
    acc!.grads.data.set(g2);
    const second = await acc!.collab.step(acc!.grads, 4, 1, 1);
    assert.equal(acc!.optimizer.stepCount, step, `8 samples: inner step ${step} taken`);
    assert.equal(second.type, step < H ? 'accumulated' : 'stepped', `the round ends after H = ${H} inner steps, not micro-batches`);
    ref!.grads.data.set(mean);
    assert.equal((await ref!.collab.step(ref!.grads, 8, 1, 1)).type, step < H ? 'accumulated' : 'stepped');
  }
  assert.equal(acc!.collab.epoch, 1);
  assert.ok(maxAbsDiff(acc!.params.data, ref!.params.data) <= 1e-6, `the accumulating peer and the reference differ by ${maxAbsDiff(acc!.params.data, ref!.params.data)}`);
  assert.ok(maxAbsDiff(acc!.params.data, initAlbertParams(config, 1).data) > 1e-4, 'the round moved the parameters');
});

test('innerBatchSize: a round the swarm ends between inner steps (its target batch reached) first takes an inner step on the micro-batches accumulated', { timeout: 60_000 }, async (t) => {
  // 8 samples reach the target batch before the 12 of an inner step
  const [acc] = await swarm(t, 'diloco-inner-cut', 1, { innerSteps: 50, innerBatchSize: 12, targetBatchSize: 8 });
  const [ref] = await swarm(t, 'diloco-inner-cut-ref', 1, { innerSteps: 50, targetBatchSize: 8 });
  const [g1, g2] = [gradient(acc!.grads.size, 21), gradient(acc!.grads.size, 22)];
  acc!.grads.data.set(g1);
  assert.equal((await acc!.collab.step(acc!.grads, 4, 1, 1)).type, 'accumulated');
  acc!.grads.data.set(g2);
  const ended = await acc!.collab.step(acc!.grads, 4, 1, 1);
  assert.equal(ended.type, 'stepped', JSON.stringify(ended));
  assert.equal(acc!.optimizer.stepCount, 1, 'one inner step, on the 8 samples accumulated');
  ref!.grads.data.set(g1.map((x, i) => (x + g2[i]!) / 2));
  assert.equal((await ref!.collab.step(ref!.grads, 8, 1, 1)).type, 'stepped');
  assert.ok(maxAbsDiff(acc!.params.data, ref!.params.data) <= 1e-6, `the accumulating peer and the reference differ by ${maxAbsDiff(acc!.params.data, ref!.params.data)}`);
});

test('DiLoCo with gradCompression blockwise8 or blockwise4: the pseudo-gradient goes in 8 or 4 bits; both members hold the same parameters, within the quantisation bound of the exact average', { timeout: 120_000 }, async (t) => {
  // outer lr 1 without momentum: θ_start − the round's average, so a peer alone ends at its own inner steps' result
  const options: Partial<CollaborativeOptions> = { innerSteps: 2, targetBatchSize: 1000, outerLr: 1, outerMomentum: 0, maxGradNorm: 1e9 };
  const initial = initAlbertParams(config, 1).data;
  // each peer's pseudo-gradient Δᵢ, from a peer alone with its gradient
  const deltas: Float32Array[] = [];
  for (const seed of [31, 32]) {
    const [solo] = await swarm(t, `diloco-8bit-solo-${seed}`, 1, options);
    solo!.grads.data.set(gradient(solo!.grads.size, seed));
    assert.equal((await trainOneEpoch(solo!)).averagedWith, 1);
    deltas.push(initial.map((x, i) => x - solo!.params.data[i]!));
  }
  const exact = initial.map((x, i) => x - (deltas[0]![i]! + deltas[1]![i]!) / 2);
  // each sender's part loses at most a fraction of its block's absmax per value (blockwise8: half a
  // step of absmax/127; blockwise4: half NF4's largest gap, 0.152), the reducer's average as much again
  const absmax = deltas.map((d) => d.reduce((m, x) => Math.max(m, Math.abs(x)), 0));
  const bound = (perRounding: number) => (absmax[0]! + absmax[1]!) * perRounding * 1.01 + 1e-7;
  const bound8 = bound(1 / 254);
  assert.ok(maxAbsDiff(exact, initial) > 100 * bound8, 'the pseudo-gradient is far larger than the 8-bit error');
  for (const [gradCompression, perRounding] of [['blockwise8', 1 / 254], ['blockwise4', 0.152]] as const) {
    const pair = await swarm(t, `diloco-${gradCompression}`, 2, { ...options, gradCompression });
    pair.forEach((p, i) => p.grads.data.set(gradient(p.grads.size, 31 + i)));
    await new Promise((r) => setTimeout(r, 1500)); // past maxRefresh: each peer's round expects the other
    const stepped = await Promise.all(pair.map((p) => trainOneEpoch(p)));
    for (const s of stepped) assert.equal(s.averagedWith, 2, `${gradCompression}: averaged with both (${s.reason ?? ''})`);
    assert.deepEqual(pair[1]!.params.data, pair[0]!.params.data, `${gradCompression}: every member decodes the same bytes: the same parameters`);
    const err = maxAbsDiff(pair[0]!.params.data, exact);
    assert.ok(err <= bound(perRounding), `${gradCompression} round off the exact average by ${err}, bound ${bound(perRounding)}`);
    assert.ok(err > (gradCompression === 'blockwise4' ? bound8 : 1e-7), `${gradCompression}: error ${err} is too small for the round to have been in its bits`);
  }
});

test('DiLoCo: a micro-batch near the end of a round does not wait for the progress read it makes due (nothing is scheduled ahead); the peer ahead that read finds is acted on a micro-batch later', { timeout: 60_000 }, async (t) => {
  const [nodeA, nodeB] = await startSwarm(t, 2, { runId: 'diloco-progress-background' });
  // a 12-sample round: its first micro-batch starts the rate's clock; after the second (4 samples in
  // the ≥ 1.5 s since) the round ends in about as long again, within the matchmaking time
  const p = unstarted(t, nodeA!, 1, { outerOptimizer: 'diloco', innerSteps: 50, targetBatchSize: 12, matchmakingTime: 5 });
  await p.collab.start();
  await p.collab.step(p.grads, 4, 1, 1);
  // the peer ahead starts after that first micro-batch: a loaded machine can make the first one's
  // fetch due too, and a fetch that found it would be acted on at once, before the one this test is about
  const ahead = unstarted(t, nodeB!, 2, { outerOptimizer: 'diloco' });
  await ahead.collab.start({ epoch: 5 });
  await new Promise((r) => setTimeout(r, 1500)); // past maxRefresh: the next micro-batch makes a fetch due
  const first = await p.collab.step(p.grads, 4, 1, 1);
  assert.equal(first.type, 'accumulated', `the micro-batch returned on the view it had, without waiting for the fetch: ${JSON.stringify(first)}`);
  assert.ok(first.type === 'accumulated' && first.progress.eta <= 5, `its round ends within the matchmaking time (eta ${first.type === 'accumulated' ? first.progress.eta : '?'} s)`);
  const later: StepOutcome[] = [];
  for (let k = 0; k < 100 && later.at(-1)?.type !== 'loaded'; k++) {
    await new Promise((r) => setTimeout(r, 40));
    later.push(await p.collab.step(p.grads, 4, 1, 1));
  }
  assert.deepEqual(later.at(-1), { type: 'loaded', epoch: 5, donor: nodeB!.peerId.toString() }, JSON.stringify(later.slice(-3)));
});
