// CollaborativeOptimizer options on in-process swarm nodes with synthetic gradients (no engine):
// every micro-batch's progress is told, the one completing the target batch before its step;
// average_state_every re-converges peers whose parameters differ; use_local_updates steps every
// micro-batch and relies on state averaging; pre-scheduled matchmaking finds the group before the epoch
// ends; a peer whose state download failed stays behind, without stepping, until a retry succeeds; a
// peer on other data is never averaged with and is told what to do. DiLoCo: H = 1 with outer lr 1 and no
// momentum is parameter averaging after one local step; after a round every member holds the same
// parameters, and a newcomer downloads θ_start with the outer momentum.
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { pino, type Logger } from 'pino';
import { CollaborativeOptimizer, STATE_PREFIX, type StepOutcome } from '../../src/collab/optimizer.js';
import type { CollaborativeOptions } from '../../src/collab/options.js';
import { encodeTrainingState } from '../../src/collab/state.js';
import { createAverager } from '../../src/averaging/index.js';
import { maxAbsDiff, randomVector } from '../averaging/helpers.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { createOptimizer } from '../../src/engine/optim/index.js';
import { BASE, config, trainOneEpoch, unstarted, type Peer } from '../helpers/collab-peer.js';
import { warningLog } from '../helpers/log.js';
import { publishProgress } from '../helpers/progress.js';
import { startSwarm } from '../helpers/swarm.js';

/** Peers on in-process nodes; `options` and `log` may differ per peer (by index). */
async function peers(t: TestContext, runId: string, seeds: readonly number[], options: Partial<CollaborativeOptions> | ((i: number) => Partial<CollaborativeOptions>), log?: (i: number) => Logger): Promise<Peer[]> {
  const nodes = await startSwarm(t, seeds.length, { runId });
  return Promise.all(
    nodes.map(async (node, i) => {
      // each peer's own gradient direction, so local steps move the peers apart
      const peer = unstarted(t, node, seeds[i]!, typeof options === 'function' ? options(i) : options, log?.(i));
      peer.grads.data.set(randomVector(peer.grads.size, 100 + i, 0.01));
      await peer.collab.start();
      return peer;
    }),
  );
}

test('average_state_every: peers that start from different weights hold the same parameters after the state-averaging round', { timeout: 60_000 }, async (t) => {
  const [a, b] = await peers(t, 'opt-state-avg', [1, 2], { averageStateEvery: 1 });
  assert.ok(maxAbsDiff(a!.params.data, b!.params.data) > 0.01, 'the initial weights differ');
  const [sa, sb] = await Promise.all([trainOneEpoch(a!), trainOneEpoch(b!)]);
  for (const s of [sa, sb]) {
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
  for (const s of [sa, sb]) {
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

test('delay_grad_averaging: micro-batches go on while the all-reduce runs; each epoch’s averaged step lands later, in order, and the loss falls', { timeout: 90_000 }, async (t) => {
  const EPOCHS = 3;
  // a capped upload keeps each round in flight for a while (its group closes at once: both peers are expected)
  const list = await peers(t, 'opt-delay', [1, 1], { delayGradAveraging: true, peakLr: 0.05, uploadLimit: 64 * 1024 });
  // each peer pulls its parameters towards its own target: loss ½‖p − target‖², gradient p − target
  const targets = list.map((_, i) => randomVector(list[0]!.params.size, 7 + i, 0.05));
  const mid = targets[0]!.map((x, j) => (x + targets[1]![j]!) / 2);
  const swarmLoss = (p: Float32Array): number => p.reduce((s, x, j) => s + 0.5 * (x - mid[j]!) ** 2, 0) / p.length;
  const before = swarmLoss(list[0]!.params.data);
  const outcomes = await Promise.all(
    list.map(async (p, i) => {
      const seen: StepOutcome[] = [];
      for (let k = 0; k < 1000 && p.collab.epoch < EPOCHS; k++) {
        const loss = p.params.data.reduce((s, x, j) => s + 0.5 * (x - targets[i]![j]!) ** 2, 0) / p.params.size;
        p.grads.data.set(p.params.data.map((x, j) => x - targets[i]![j]!));
        seen.push(await p.collab.step(p.grads, 4, 1, loss));
        await new Promise((r) => setTimeout(r, 40));
      }
      const last = await p.collab.flush();
      if (last) seen.push(last);
      return seen;
    }),
  );
  for (const [i, seen] of outcomes.entries()) {
    const began = seen.flatMap((o, k) => (o.type === 'averaging' ? [{ epoch: o.epoch, k }] : []));
    const stepped = seen.flatMap((o, k) => (o.type === 'stepped' ? [{ ...o, k }] : []));
    assert.deepEqual(began.map((b) => b.epoch), [1, 2, 3], `peer ${i}: epochs advance one at a time when their rounds begin`);
    assert.deepEqual(stepped.map((s) => s.epoch), [1, 2, 3], `peer ${i}: every epoch's step lands, in order`);
    for (const [e, s] of stepped.entries()) {
      assert.ok(s.k > began[e]!.k, `peer ${i}: the step of epoch ${s.epoch} lands after its round began`);
      if (e + 1 < began.length) assert.ok(s.k < began[e + 1]!.k, `peer ${i}: the next round begins only after epoch ${s.epoch}'s step`);
      assert.equal(s.averagedWith, 2, `peer ${i}: epoch ${s.epoch} averaged with both peers (${s.reason ?? ''})`);
    }
    assert.equal(list[i]!.optimizer.stepCount, EPOCHS);
  }
  // micro-batches computed while a round was in flight: accumulated between a round's start and its step
  const overlapped = outcomes.map((seen) => seen.filter((o, k) => o.type === 'accumulated' && seen.slice(0, k).filter((x) => x.type === 'averaging').length > seen.slice(0, k).filter((x) => x.type === 'stepped').length).length);
  assert.ok(overlapped.some((n) => n > 0), `no micro-batch overlapped a round: ${overlapped.join(', ')}`);
  assert.ok(maxAbsDiff(list[0]!.params.data, list[1]!.params.data) <= 1e-6, 'same start, same averaged steps: same parameters');
  const after = swarmLoss(list[0]!.params.data);
  t.diagnostic(`loss to the swarm's mean target ${before.toExponential(3)} → ${after.toExponential(3)}`);
  assert.ok(after < before, `loss did not fall: ${before} → ${after}`);
});

test('pre-scheduled matchmaking: near the end of an epoch peers begin matchmaking, and the group they found averages the step', { timeout: 90_000 }, async (t) => {
  const EPOCHS = 3;
  const list = await peers(t, 'opt-presched', [1, 1], {});
  const stepped = await Promise.all(
    list.map(async (p) => {
      const seen: Array<Extract<StepOutcome, { type: 'stepped' }>> = [];
      while (p.collab.epoch < EPOCHS) seen.push(await trainOneEpoch(p));
      return seen;
    }),
  );
  for (const [i, seen] of stepped.entries()) {
    for (const s of seen) assert.equal(s.averagedWith, 2, `peer ${i}: epoch ${s.epoch} averaged with both peers (${s.reason ?? ''})`);
    // the first epoch may end before a peer has seen the other's progress (nothing to schedule with)
    assert.ok(seen.some((s) => s.preScheduled), `peer ${i}: no step used a pre-scheduled group`);
  }
  assert.ok(maxAbsDiff(list[0]!.params.data, list[1]!.params.data) <= 1e-6, 'same start, same averaged steps: same parameters');
});

// one epoch ahead too: a peer that never trained with the swarm must not step into its epoch with its own model
for (const ahead of [5, 1]) {
  test(`a peer whose state download fails keeps its epoch and never steps (swarm ${ahead} epoch(s) ahead); it retries, backing off, and loads once a donor serves`, { timeout: 60_000 }, async (t) => {
    const [nodeA, nodeB, nodeC] = await startSwarm(t, 3, { runId: `opt-load-retry-${ahead}` });
    const options = { targetBatchSize: 8 };
    // a peer ahead advertises its state and its progress, then crashes (no goodbye): both records stay in the DHT
    const crashed = unstarted(t, nodeA!, 1, options);
    assert.equal(await crashed.collab.start({ epoch: ahead }), undefined);
    await nodeA!.stop();

    const late = unstarted(t, nodeB!, 2, options);
    const first = await late.collab.start();
    assert.deepEqual(first && { ...first }, { type: 'loaded', epoch: 0, donor: '' }, 'the download from a peer that is gone fails');
    const before = Float32Array.from(late.params.data);
    // micro-batches worth several target batches: behind the swarm, it must not step on its own model
    for (let i = 0; i < 6; i++) {
      const o = await late.collab.step(late.grads, 4, 1, 1);
      assert.ok(o.type === 'accumulated' || (o.type === 'loaded' && o.donor === ''), JSON.stringify(o));
      assert.equal(late.collab.epoch, 0);
    }
    assert.equal(maxAbsDiff(before, late.params.data), 0, 'the parameters were stepped while behind');

    // a donor at that epoch appears: a later retry loads its weights
    const donor = unstarted(t, nodeC!, 3, options);
    await donor.collab.start({ epoch: ahead });
    let loaded: StepOutcome | undefined;
    for (let i = 0; i < 200 && loaded === undefined; i++) {
      const o = await late.collab.step(late.grads, 4, 1, 1);
      if (o.type === 'loaded' && o.donor !== '') loaded = o;
      else await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(loaded, { type: 'loaded', epoch: ahead, donor: nodeC!.peerId.toString() });
    assert.equal(late.collab.epoch, ahead);
    assert.equal(maxAbsDiff(donor.params.data, late.params.data), 0, 'the loaded weights are the donor’s');
  });
}

test('a peer that stops says so: a peer behind it does not try to catch up with it, and trains on alone', { timeout: 60_000 }, async (t) => {
  const [nodeA, nodeB] = await startSwarm(t, 2, { runId: 'opt-left' });
  const ahead = unstarted(t, nodeA!, 1, {});
  await ahead.collab.start({ epoch: 5 });
  await ahead.collab.stop();
  const behind = unstarted(t, nodeB!, 2, {});
  assert.equal(await behind.collab.start(), undefined, 'it tried to load the state of a peer that left');
  const s = await trainOneEpoch(behind);
  assert.equal(s.epoch, 1);
  assert.equal(s.averagedWith, 1, 'nobody is left to average with');
});

test('micro-batches do not wait for the swarm’s progress: the fetch a micro-batch makes due runs in the background, and the peer ahead it finds is acted on a micro-batch later', { timeout: 60_000 }, async (t) => {
  const [nodeA, nodeB] = await startSwarm(t, 2, { runId: 'opt-progress-background' });
  const p = unstarted(t, nodeA!, 1, { targetBatchSize: 1000 });
  await p.collab.start();
  const ahead = unstarted(t, nodeB!, 2, {});
  await ahead.collab.start({ epoch: 5 });
  await new Promise((r) => setTimeout(r, 1500)); // past maxRefresh: the next micro-batch makes a fetch due
  const first = await p.collab.step(p.grads, 4, 1, 1);
  assert.equal(first.type, 'accumulated', 'the micro-batch returned on the view it had, without waiting for the fetch');
  const later: StepOutcome[] = [];
  for (let k = 0; k < 100 && later.at(-1)?.type !== 'loaded'; k++) {
    await new Promise((r) => setTimeout(r, 40));
    later.push(await p.collab.step(p.grads, 4, 1, 1));
  }
  assert.deepEqual(later.at(-1), { type: 'loaded', epoch: 5, donor: nodeB!.peerId.toString() }, JSON.stringify(later.slice(-3)));
});

test('every micro-batch tells its progress, the one that completes the target batch too, before its step resets the count (the dashboard’s target batch grows to full)', { timeout: 60_000 }, async (t) => {
  const [node] = await startSwarm(t, 1, { runId: 'opt-progress-events' });
  const params = initAlbertParams(config, 1);
  const seen: Array<[epoch: number, samples: number]> = [];
  const collab = new CollaborativeOptimizer(node!, config, params, createOptimizer(params, { kind: 'lamb' }), { ...BASE, targetBatchSize: 8 }, pino({ level: 'silent' }), {
    progress: (g) => seen.push([g.epoch, g.samples]),
  });
  t.after(() => collab.stop());
  await collab.start();
  const grads = params.zerosLike();
  grads.data.set(randomVector(grads.size, 101, 0.01));
  const outcomes: string[] = [];
  for (let k = 0; k < 4; k++) outcomes.push((await collab.step(grads, 4, 1, 1)).type);
  assert.deepEqual(outcomes, ['accumulated', 'stepped', 'accumulated', 'stepped']);
  assert.deepEqual(seen, [[0, 4], [0, 8], [1, 4], [1, 8]]);
});

test('the throughput a peer reports is of its wall time between micro-batches, not of the compute time it passes: others extrapolate its record with it', { timeout: 60_000 }, async (t) => {
  const [node] = await startSwarm(t, 1, { runId: 'opt-rate' });
  const p = unstarted(t, node!, 1, { targetBatchSize: 1_000_000 });
  await p.collab.start();
  // 4 samples computed in 10 ms (400 samples/s), every 100 ms or more: the time between is the
  // peer's too (loading data, storing records), so it makes at most 40 samples a second
  let last: StepOutcome | undefined;
  for (let k = 0; k < 50; k++) {
    last = await p.collab.step(p.grads, 4, 0.01, 1);
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(last?.type, 'accumulated');
  const rate = last.type === 'accumulated' ? last.progress.samplesPerSecond : Number.NaN;
  assert.ok(rate > 0 && rate <= 60, `reported ${rate} samples/s for 4 samples every ≥ 100 ms`);
});

test('a progress report no advertised state backs (a peer claims epoch 1,000,000 and serves nothing) is left out: the others train and average on, warned once', { timeout: 60_000 }, async (t) => {
  const [liar, nodeA, nodeB] = await startSwarm(t, 3, { runId: 'opt-bogus-epoch' });
  await publishProgress(liar!, { epoch: 1_000_000, samplesPerSecond: 1000 });
  const { warnings, log } = warningLog();
  const [a, b] = [unstarted(t, nodeA!, 1, {}, log), unstarted(t, nodeB!, 2, {})];
  assert.equal(await a.collab.start(), undefined, 'it tried to load a state nobody has');
  assert.equal(await b.collab.start(), undefined);
  for (const s of await Promise.all([trainOneEpoch(a), trainOneEpoch(b)])) {
    assert.equal(s.epoch, 1);
    assert.equal(s.averagedWith, 2, `the two honest peers averaged (${s.reason ?? ''})`);
  }
  const leftOut = warnings.filter((w) => w.includes('leaving their progress out'));
  assert.equal(leftOut.length, 1, warnings.join('\n'));
  assert.match(leftOut[0]!, new RegExp(`1 peer\\(s\\) report epochs up to 1000000 \\(${liar!.peerId.toString()}\\), but no peer advertises a state`));
});

test('a donor whose state says another epoch inside than the one it advertised and sent (10⁹) is not loaded: the newcomer stays at its epoch with its own parameters, warned', { timeout: 60_000 }, async (t) => {
  const [liar, nodeA] = await startSwarm(t, 2, { runId: 'opt-state-content-epoch' });
  const served = createAverager(liar!, { prefix: STATE_PREFIX });
  t.after(() => served.stop());
  const params = initAlbertParams(config, 9);
  const optimizer = createOptimizer(params, { kind: 'lamb' }).exportState();
  // advertised, and sent in the header, as epoch 2 (the swarm's progress): only the bytes claim 10⁹
  const { advertise } = await served.serveState({ epoch: () => 2, snapshot: () => ({ epoch: 2, data: encodeTrainingState({ epoch: 1_000_000_000, config, params, optimizer }) }) });
  await advertise();
  await publishProgress(liar!, { epoch: 2 });
  const { warnings, log } = warningLog();
  const a = unstarted(t, nodeA!, 1, {}, log);
  const own = Float32Array.from(a.params.data);
  assert.deepEqual(await a.collab.start(), { type: 'loaded', epoch: 0, donor: '' }, 'the load failed');
  assert.equal(a.collab.epoch, 0);
  assert.equal(maxAbsDiff(a.params.data, own), 0, 'its parameters are its own');
  assert.ok(warnings.some((w) => w.includes(`peer ${liar!.peerId.toString()} sent a state of epoch 1000000000 in a download of epoch 2`)), warnings.join('\n'));
});

test('a newcomer that left out unbacked reports trains on its own, and loads the state as soon as a peer ahead advertises one', { timeout: 60_000 }, async (t) => {
  const [asleep, nodeB, nodeC] = await startSwarm(t, 3, { runId: 'opt-unbacked-then-load' });
  const options = { targetBatchSize: 8 };
  // a peer at epoch 5 whose state advertisement is gone (asleep longer than its 30 s lifetime) but whose progress lingers
  await publishProgress(asleep!, { epoch: 5 });
  const late = unstarted(t, nodeB!, 2, options);
  assert.equal(await late.collab.start(), undefined, 'nothing to load');
  const alone = await trainOneEpoch(late);
  assert.equal(alone.epoch, 1, 'it trained on its own');
  // a peer one epoch ahead serves its state: the newcomer, which never trained with the swarm, loads it
  // instead of stepping into its epoch with its own model (a peer that had would join its round)
  const donor = unstarted(t, nodeC!, 3, options);
  await donor.collab.start({ epoch: 2 });
  let outcome: StepOutcome | undefined;
  for (let i = 0; i < 100 && outcome?.type !== 'loaded'; i++) {
    outcome = await late.collab.step(late.grads, 4, 1, 1);
    assert.notEqual(outcome.type, 'stepped', `it stepped at epoch ${late.collab.epoch} instead of loading`);
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual(outcome, { type: 'loaded', epoch: 2, donor: nodeC!.peerId.toString() });
  assert.equal(maxAbsDiff(donor.params.data, late.params.data), 0);
});

test('a peer restarted behind its own earlier record (crashed after its last checkpoint) is not held back by it', { timeout: 60_000 }, async (t) => {
  const [node] = await startSwarm(t, 2, { runId: 'opt-own-record' });
  await publishProgress(node!, { epoch: 5 });
  const { warnings, log } = warningLog();
  const peer = unstarted(t, node!, 1, {}, log);
  assert.equal(await peer.collab.start({ epoch: 3 }), undefined);
  const s = await trainOneEpoch(peer);
  assert.equal(s.epoch, 4);
  assert.deepEqual(warnings.filter((w) => !w.startsWith('Averaging gradients failed')), [], 'no download tried, no report left out');
});

test('a peer on another tokenizer steps alone, told both hashes and what to do; the peers on the run’s data average together', { timeout: 90_000 }, async (t) => {
  const runData = { datasetId: 'a'.repeat(64), tokenizerSha256: 'b'.repeat(64) };
  const other = { ...runData, tokenizerSha256: 'c'.repeat(64) };
  const odd = warningLog();
  const [a, b, c] = await peers(t, 'opt-data', [1, 1, 1], (i) => ({ data: i === 2 ? other : runData }), (i) => (i === 2 ? odd.log : pino({ level: 'silent' })));
  const [sa, sb, sc] = await Promise.all([trainOneEpoch(a!), trainOneEpoch(b!), trainOneEpoch(c!)]);
  assert.equal(sa.averagedWith, 2, sa.reason);
  assert.equal(sb.averagedWith, 2, sb.reason);
  assert.equal(sc.averagedWith, 1, 'the odd peer averaged with nobody');
  assert.ok(sc.reason?.includes('b'.repeat(64)) && sc.reason.includes('c'.repeat(64)), `its reason names both tokenizer hashes: ${sc.reason}`);
  assert.ok(odd.warnings.some((w) => w.includes('--data-dir NEW_DIR')), `it is told what to do: ${odd.warnings.join('\n')}`);
  assert.ok(maxAbsDiff(a!.params.data, b!.params.data) <= 1e-6, 'the two peers took the same averaged step');
});

/** Longer than BASE's maxRefresh: the next micro-batch of every peer reads the others' progress afresh (their records from start), so its round expects them. */
const pastRefresh = (): Promise<void> => new Promise((r) => setTimeout(r, 1500));

test('DiLoCo with H = 1, outer lr 1 and no momentum takes the steps of use_local_updates with parameters averaged every epoch (the average of one local step each), to float tolerance', { timeout: 90_000 }, async (t) => {
  const EPOCHS = 3;
  // one local step per peer per epoch on both paths: one 4-sample micro-batch fills the plain path's
  // target batch; DiLoCo's round ends after H = 1, and its larger target keeps each pseudo-gradient's
  // weight bound (a share of the target) above the 4 samples it carries, so both peers weigh the same
  const train = async (runId: string, options: Partial<CollaborativeOptions>): Promise<Peer[]> => {
    const list = await peers(t, runId, [1, 1], { aggregation: 'mean', ...options });
    await pastRefresh();
    for (let e = 0; e < EPOCHS; e++) {
      const stepped = await Promise.all(list.map((p) => trainOneEpoch(p)));
      for (const s of stepped) assert.equal(Math.max(s.averagedWith, s.stateAveraging && 'averagedWith' in s.stateAveraging ? s.stateAveraging.averagedWith : 0), 2, `${runId} epoch ${s.epoch}: averaged with both (${s.reason ?? ''})`);
    }
    for (const p of list) assert.equal(p.optimizer.stepCount, EPOCHS, `${runId}: one inner step per epoch`);
    return list;
  };
  const initial = initAlbertParams(config, 1).data;
  const plain = await train('opt-diloco-plain', { targetBatchSize: 4, useLocalUpdates: true, averageStateEvery: 1 });
  const diloco = await train('opt-diloco-h1', { targetBatchSize: 32, outerOptimizer: 'diloco', innerSteps: 1, outerLr: 1, outerMomentum: 0 });
  assert.ok(maxAbsDiff(plain[0]!.params.data, initial) > 1e-3, 'the peers trained');
  for (const [i, p] of diloco.entries()) assert.ok(maxAbsDiff(p.params.data, plain[i]!.params.data) <= 1e-6, `peer ${i}: DiLoCo and the plain path differ by ${maxAbsDiff(p.params.data, plain[i]!.params.data)}`);
});

test('DiLoCo: each peer takes H local steps, then every member of the round holds the same parameters; a newcomer downloads θ_start with the outer momentum, so its next round lands where the others’ does', { timeout: 120_000 }, async (t) => {
  const H = 3;
  const options: Partial<CollaborativeOptions> = { outerOptimizer: 'diloco', innerSteps: H, targetBatchSize: 1000, peakLr: 0.05 };
  const nodes = await startSwarm(t, 4, { runId: 'opt-diloco' });
  // the same initial weights (seed 1), each peer its own gradient direction: the inner steps move them apart
  const list = nodes.map((node, i) => {
    const p = unstarted(t, node, 1, options);
    p.grads.data.set(randomVector(p.grads.size, 100 + i, 0.01));
    return p;
  });
  const [newcomer, ...first] = [list[3]!, ...list.slice(0, 3)];
  await Promise.all(first.map((p) => p.collab.start()));
  await pastRefresh();
  const round = async (members: Peer[], epoch: number): Promise<void> => {
    const before = members.map((p) => p.optimizer.stepCount);
    const stepped = await Promise.all(members.map((p) => trainOneEpoch(p)));
    for (const [i, s] of stepped.entries()) {
      assert.equal(s.epoch, epoch, 'one outer step is one epoch');
      assert.equal(s.averagedWith, members.length, `peer ${i} averaged its pseudo-gradient with every member (${s.reason ?? ''})`);
      assert.equal(members[i]!.optimizer.stepCount - before[i]!, H, `peer ${i} took H inner steps`);
    }
    for (const p of members.slice(1)) assert.ok(maxAbsDiff(p.params.data, members[0]!.params.data) <= 1e-6, `after round ${epoch} parameters differ by ${maxAbsDiff(p.params.data, members[0]!.params.data)}`);
  };
  const initial = Float32Array.from(first[0]!.params.data);
  await round(first, 1);
  await round(first, 2); // the outer momentum is not zero from here
  assert.ok(maxAbsDiff(first[0]!.params.data, initial) > 1e-3, 'the outer steps moved the parameters');

  newcomer.params.data.set(randomVector(newcomer.params.size, 9, 0.02)); // not the swarm's model
  const loaded = await newcomer.collab.start();
  assert.equal(loaded?.type === 'loaded' && loaded.epoch, 2, JSON.stringify(loaded));
  assert.deepEqual(newcomer.params.data, first[0]!.params.data, 'the newcomer holds θ_start of the swarm');
  // with the momentum of a fresh optimizer its outer step would differ from the others' by lr·μ²·b
  await round(list, 3);
});
