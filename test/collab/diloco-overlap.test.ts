// DiLoCo's one-step-delayed outer update (--outer-overlap) and the outer momentum in a peer's own
// checkpoint, on in-process swarm nodes with synthetic gradients (no engine). With the overlap a
// peer sends its pseudo-gradient and takes its next inner steps at once; when the round lands, θ_start
// takes the outer step and the inner steps taken meanwhile are re-based on it: checked against the
// arithmetic written out below, θ_start equal on every member after each round, a failed background
// round stepping on the peer's own pseudo-gradient, stop() during a round. A peer resumed from its own
// checkpoint takes the outer step the uninterrupted peer takes (the momentum is in the checkpoint).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StepOutcome } from '../../src/collab/optimizer.js';
import type { CollaborativeOptions } from '../../src/collab/options.js';
import { FullStateSaver, loadFullState, PEER_STATE_CHECKPOINT } from '../../src/collab/full-state.js';
import type { Optimizer } from '../../src/engine/optim/index.js';
import { createLogger } from '../../src/log/logger.js';
import { openStore } from '../../src/store/index.js';
import { maxAbsDiff, randomVector } from '../averaging/helpers.js';
import { config, trainOneEpoch, unstarted, type Peer } from '../helpers/collab-peer.js';
import { startSwarm } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

/** The inner step of these tests: θ ← θ − ETA·g (not LAMB), so the reference below is a line of arithmetic. */
const ETA = 0.5;

/** An optimizer whose step is plain SGD at ETA (the scheduled rate is ignored); its moments stay LAMB's, untouched. */
function sgd(after?: (params: Float32Array, steps: number) => void): (lamb: Optimizer) => Optimizer {
  return (lamb) => {
    let steps = 0;
    return {
      get config() {
        return lamb.config;
      },
      get stepCount() {
        return steps;
      },
      step(params, grads) {
        for (let i = 0; i < params.size; i++) params.data[i]! -= ETA * grads.data[i]!;
        steps++;
        after?.(params.data, steps);
      },
      exportState: (into) => lamb.exportState(into),
      importState: (s) => lamb.importState(s),
      copyMoments: (into, first, end) => lamb.copyMoments(into, first, end),
    };
  };
}

/** Longer than BASE's maxRefresh: each peer's next micro-batch reads the others' progress afresh, so its round expects them. */
const pastRefresh = (): Promise<void> => new Promise((r) => setTimeout(r, 1500));

/** One micro-batch of `p` whose gradient pulls its parameters towards `target` (loss ½‖θ − target‖²). */
function microBatch(p: Peer, target: Float32Array): Promise<StepOutcome> {
  const g = p.grads.data;
  const x = p.params.data;
  for (let i = 0; i < g.length; i++) g[i] = x[i]! - target[i]!;
  return p.collab.step(p.grads, 4, 1, 1);
}

test('outer overlap, H = 1, outer lr 1, no momentum: each round lands after the next inner step and re-bases it, as the arithmetic says; θ_start is the same on both peers after every round', { timeout: 90_000 }, async (t) => {
  const ROUNDS = 3;
  // mean of equal weights (4 samples each; the large target keeps the weight bound above them); no clip: the reference steps on the raw gradient
  const options: Partial<CollaborativeOptions> = { outerOptimizer: 'diloco', outerOverlap: true, innerSteps: 1, outerLr: 1, outerMomentum: 0, targetBatchSize: 32, aggregation: 'mean', maxGradNorm: 1e9 };
  const nodes = await startSwarm(t, 2, { runId: 'diloco-overlap' });
  const list = nodes.map((node) => unstarted(t, node, 1, options, undefined, sgd()));
  await Promise.all(list.map((p) => p.collab.start()));
  await pastRefresh();
  const n = list[0]!.params.size;
  const targets = list.map((_, i) => randomVector(n, 7 + i, 0.05));

  // the reference, per peer i: x its θ, S the shared θ_start, sent its pseudo-gradient in flight
  const S = Float64Array.from(list[0]!.params.data);
  const x = list.map((p) => Float64Array.from(p.params.data));
  const sent = list.map(() => new Float64Array(n));
  const inner = (i: number): void => {
    for (let j = 0; j < n; j++) x[i]![j]! -= ETA * (x[i]![j]! - targets[i]![j]!);
  };
  // round 0: one inner step, then the pseudo-gradient S − x goes out and the peer moves to epoch 1
  for (const i of [0, 1]) {
    inner(i);
    for (let j = 0; j < n; j++) sent[i]![j] = S[j]! - x[i]![j]!;
  }
  const began = await Promise.all(list.map((p, i) => microBatch(p, targets[i]!)));
  assert.deepEqual(began, [{ type: 'averaging', epoch: 1 }, { type: 'averaging', epoch: 1 }]);

  for (let r = 1; r <= ROUNDS; r++) {
    // the next micro-batch's inner step runs on θ while round r − 1 is in flight; then the round lands:
    // S' = S − mean(sent) (lr 1, μ 0), x ← S' + (x − (S − sent_i)); round r begins at once from S'
    const Snew = new Float64Array(n);
    for (let j = 0; j < n; j++) Snew[j] = S[j]! - (sent[0]![j]! + sent[1]![j]!) / 2;
    for (const i of [0, 1]) {
      inner(i);
      for (let j = 0; j < n; j++) {
        x[i]![j] = Snew[j]! + (x[i]![j]! - (S[j]! - sent[i]![j]!));
        sent[i]![j] = Snew[j]! - x[i]![j]!;
      }
    }
    S.set(Snew);

    const landed = await Promise.all(list.map((p, i) => microBatch(p, targets[i]!)));
    for (const [i, o] of landed.entries()) {
      assert.ok(o.type === 'stepped' && o.epoch === r && o.averagedWith === 2, `peer ${i}, round ${r - 1}: ${JSON.stringify(o)}`);
      const state = list[i]!.collab.stateToSave();
      assert.equal(state.epoch, r, 'the round of epoch r is in flight: its θ_start is served and saved');
      assert.ok(maxAbsDiff(state.params.data, Float32Array.from(S)) <= 1e-6, `peer ${i}, round ${r - 1}: θ_start off the reference by ${maxAbsDiff(state.params.data, Float32Array.from(S))}`);
      assert.ok(maxAbsDiff(list[i]!.params.data, Float32Array.from(x[i]!)) <= 1e-6, `peer ${i}, round ${r - 1}: θ off the reference by ${maxAbsDiff(list[i]!.params.data, Float32Array.from(x[i]!))}`);
    }
    assert.equal(maxAbsDiff(list[0]!.collab.stateToSave().params.data, list[1]!.collab.stateToSave().params.data), 0, `round ${r - 1}: θ_start differs between the peers`);
    assert.ok(maxAbsDiff(list[0]!.params.data, list[1]!.params.data) > 1e-3, 'each peer keeps its own inner progress on top of θ_start');
  }
  const last = await Promise.all(list.map((p) => p.collab.flush()));
  for (const o of last) assert.ok(o?.type === 'stepped' && o.epoch === ROUNDS + 1 && o.averagedWith === 2, JSON.stringify(o));
  assert.equal(maxAbsDiff(list[0]!.collab.stateToSave().params.data, list[1]!.collab.stateToSave().params.data), 0);
});

/** Micro-batches (40 ms apart) until a step lands; the outcomes seen, that step last. */
async function untilStepped(p: Peer): Promise<StepOutcome[]> {
  const seen: StepOutcome[] = [];
  for (let k = 0; k < 400; k++) {
    const o = await p.collab.step(p.grads, 4, 1, 1);
    seen.push(o);
    if (o.type === 'stepped') return seen;
    await new Promise((r) => setTimeout(r, 40));
  }
  throw new Error(`no step within 400 micro-batches: ${JSON.stringify(seen.slice(-3))}`);
}

test('outer overlap: a background round that fails steps θ_start on the peer’s own pseudo-gradient and re-bases the inner steps; stop() while a round is in flight ends it, and it never lands', { timeout: 60_000 }, async (t) => {
  const LR = 0.5;
  const [node] = await startSwarm(t, 1, { runId: 'diloco-overlap-alone' });
  // θ after the second inner step (what the round sends: θ_sent) and after the latest
  let sentTheta: Float32Array | undefined;
  let lastInner: Float32Array | undefined;
  const record = (params: Float32Array, steps: number): void => {
    if (steps === 2) sentTheta = params.slice();
    lastInner = params.slice();
  };
  // alone: no group forms within the round's wait (max(matchmaking time, averaging timeout) = 2 s)
  const p = unstarted(t, node!, 1, { outerOptimizer: 'diloco', outerOverlap: true, innerSteps: 2, outerLr: LR, outerMomentum: 0, matchmakingTime: 1, averagingTimeout: 2, maxGradNorm: 1e9 }, undefined, sgd(record));
  await p.collab.start();
  const S0 = p.params.data.slice();
  const first = await untilStepped(p);
  // the round began after H = 2 inner steps (θ_sent); two more inner steps made the next round due, which waited for this one to land
  assert.deepEqual(first.map((o) => o.type), ['accumulated', 'averaging', 'accumulated', 'stepped']);
  const stepped = first.at(-1)!;
  assert.ok(stepped.type === 'stepped' && stepped.epoch === 1 && stepped.averagedWith === 1 && stepped.reason !== undefined, JSON.stringify(stepped));
  assert.equal(p.optimizer.stepCount, 4);
  const before = lastInner!; // θ when the round landed
  const start = p.collab.stateToSave();
  for (let j = 0; j < S0.length; j += 997) {
    const sent = S0[j]! - sentTheta![j]!;
    const S1 = S0[j]! - LR * sent; // μ 0: the outer step on this peer's own pseudo-gradient
    assert.ok(Math.abs(start.params.data[j]! - S1) <= 1e-6, `θ_start[${j}] ${start.params.data[j]} ≠ ${S1}`);
    assert.ok(Math.abs(p.params.data[j]! - (S1 + before[j]! - sentTheta![j]!)) <= 1e-6, `θ[${j}] not re-based on the new θ_start`);
  }

  // the next round is in flight (it began as the failed one landed): stop() ends it, and its outcome is never applied
  assert.equal(start.epoch, 1, 'the round of epoch 1 is in flight');
  const held = p.params.data.slice();
  await p.collab.stop();
  await new Promise((r) => setTimeout(r, 2500)); // past the round's wait: had it run on, it would have failed by now
  assert.deepEqual(p.params.data, held, 'nothing landed after stop()');
});

test('outer overlap: a peer whose parameters break while its round is in flight restores its backup and gives that round up; the other member does not average with it', { timeout: 60_000 }, async (t) => {
  // A's second inner step leaves a NaN: A restores its backup, and its round of epoch 0 (waiting for B) must stop speaking for it
  const broken = sgd((params, steps) => {
    if (steps === 2) params[0] = Number.NaN;
  });
  const options: Partial<CollaborativeOptions> = { outerOptimizer: 'diloco', outerOverlap: true, innerSteps: 1, targetBatchSize: 32, matchmakingTime: 1, averagingTimeout: 4, maxGradNorm: 1e9 };
  const nodes = await startSwarm(t, 2, { runId: 'diloco-overlap-dropped' });
  const [a, b] = [unstarted(t, nodes[0]!, 1, options, undefined, broken), unstarted(t, nodes[1]!, 2, options, undefined, sgd())];
  await Promise.all([a, b].map((p) => p.collab.start()));
  await pastRefresh();
  assert.deepEqual(await a.collab.step(a.grads, 4, 1, 1), { type: 'averaging', epoch: 1 });
  const restored = await a.collab.step(a.grads, 4, 1, 1);
  assert.equal(restored.type, 'restored', JSON.stringify(restored));
  // B ends its round of epoch 0 now, while A's given-up round would still be waiting for it
  assert.deepEqual(await b.collab.step(b.grads, 4, 1, 1), { type: 'averaging', epoch: 1 });
  const landed = await b.collab.flush();
  assert.ok(landed?.type === 'stepped' && landed.averagedWith === 1 && landed.reason !== undefined, `B averaged with the round A gave up: ${JSON.stringify(landed)}`);
});

test('a DiLoCo peer resumed from its own checkpoint (θ_start, LAMB state and the outer momentum) takes the outer step the uninterrupted peer takes; with zero momentum it would not', { timeout: 90_000 }, async (t) => {
  const H = 2;
  // each peer alone in its swarm: every round fails after 2 s and steps on the peer's own pseudo-gradient, with momentum 0.9
  const options: Partial<CollaborativeOptions> = { outerOptimizer: 'diloco', innerSteps: H, matchmakingTime: 1, averagingTimeout: 2, peakLr: 0.05 };
  const peer = async (runId: string, seed: number): Promise<Peer> => unstarted(t, (await startSwarm(t, 1, { runId }))[0]!, seed, options);
  const a = await peer('diloco-ckpt-a', 1);
  await a.collab.start();
  for (let e = 1; e <= 2; e++) assert.equal((await trainOneEpoch(a)).epoch, e);

  const store = openStore(tmpDir(t));
  const saver = new FullStateSaver(store, createLogger({ logLevel: 'silent', logFormat: 'json' }));
  t.after(async () => {
    await saver.close();
    store.close();
  });
  const save = saver.save(PEER_STATE_CHECKPOINT, { ...a.collab.stateToSave(), config, optimizer: a.optimizer }, { runId: 'diloco-ckpt' }, 2);
  assert.ok(save);
  await save.snapshotted;
  await save.written;
  const loaded = loadFullState(store, PEER_STATE_CHECKPOINT, { runId: 'diloco-ckpt' });
  assert.ok(loaded?.state.outerMomentum, 'the checkpoint holds the outer momentum');
  assert.equal(loaded.state.epoch, 2);
  assert.ok(maxAbsDiff(loaded.state.outerMomentum.data, new Float32Array(loaded.state.params.size)) > 0, 'after two outer steps the momentum is not zero');

  // what a restarted peer does (swarm-peer.ts): its parameters and LAMB state from the checkpoint, the momentum to start()
  const resume = async (runId: string, momentum: boolean): Promise<Peer> => {
    const p = await peer(runId, 1);
    p.grads.data.set(a.grads.data); // the same gradient as `a` (clipped in place by its steps)
    p.params.data.set(loaded.state.params.data);
    p.optimizer.importState(loaded.state.optimizer!);
    await p.collab.start({ epoch: loaded.state.epoch, ...(momentum ? { outerMomentum: loaded.state.outerMomentum } : {}) });
    return p;
  };
  const [resumed, zero] = await Promise.all([resume('diloco-ckpt-b', true), resume('diloco-ckpt-c', false)]);
  const stepped = await Promise.all([a, resumed, zero].map((p) => trainOneEpoch(p)));
  assert.deepEqual(stepped.map((s) => s.epoch), [3, 3, 3]);
  assert.equal(maxAbsDiff(resumed.params.data, a.params.data), 0, 'the resumed peer’s outer step is the uninterrupted one’s');
  assert.ok(maxAbsDiff(zero.params.data, a.params.data) > 1e-6, `without the momentum the step would differ (by ${maxAbsDiff(zero.params.data, a.params.data)})`);
});

test('a DiLoCo peer whose inner step breaks its parameters restores θ_start and the outer momentum of its round: its outer step is still the swarm’s', { timeout: 90_000 }, async (t) => {
  const H = 2;
  // A's first inner step of round 3 leaves a NaN; a backup every epoch holds round 3's start
  const broken = sgd((params, steps) => {
    if (steps === 2 * H + 1) params[0] = Number.NaN;
  });
  const options: Partial<CollaborativeOptions> = { outerOptimizer: 'diloco', innerSteps: H, targetBatchSize: 1000, aggregation: 'mean', backupEverySteps: 1 };
  const nodes = await startSwarm(t, 2, { runId: 'diloco-restore' });
  const [a, b] = [unstarted(t, nodes[0]!, 1, options, undefined, broken), unstarted(t, nodes[1]!, 1, options, undefined, sgd())];
  b.grads.data.set(randomVector(b.grads.size, 200, 0.01)); // its own direction: the pseudo-gradients differ
  const epoch = async (): Promise<void> => {
    const stepped = await Promise.all([a, b].map((p) => untilStepped(p)));
    for (const last of stepped.map((s) => s.at(-1)!)) assert.ok(last.type === 'stepped' && last.averagedWith === 2, `averaged with both: ${JSON.stringify(last)}`);
  };
  await Promise.all([a, b].map((p) => p.collab.start()));
  await pastRefresh();
  await epoch();
  await epoch(); // the outer momentum is not zero from here
  const restored = await a.collab.step(a.grads, 4, 1, 1);
  assert.equal(restored.type, 'restored', JSON.stringify(restored));
  const [sa, sb] = [a.collab.stateToSave(), b.collab.stateToSave()];
  assert.equal(sa.epoch, sb.epoch, 'A restored the backup of the round both are in');
  assert.equal(maxAbsDiff(sa.params.data, sb.params.data), 0, 'A begins the round again from its θ_start');
  assert.equal(maxAbsDiff(sa.outerMomentum!.data, sb.outerMomentum!.data), 0, 'with the outer momentum the swarm holds');
  await epoch();
  assert.ok(maxAbsDiff(a.params.data, b.params.data) <= 1e-6, `after the round the peers hold different parameters (by ${maxAbsDiff(a.params.data, b.params.data)})`);
});

