// Issue 17 item 3 in the collaborative optimizer, on in-process swarm nodes with synthetic gradients:
// non-finite micro-batches are skipped and counted, a peer whose gradients stay non-finite leaves
// averaging (and comes back), and a step that breaks the parameters is undone from the in-memory
// backup, after which the peer loads the swarm's state.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import type { StepOutcome } from '../../src/collab/optimizer.js';
import type { Optimizer } from '../../src/engine/optim/index.js';
import { maxAbsDiff } from '../averaging/helpers.js';
import { trainOneEpoch, unstarted, type Peer } from '../helpers/collab-peer.js';
import { startSwarm } from '../helpers/swarm.js';

/** A logger that keeps the messages of its info lines (and worse). */
function infoLog() {
  const lines: string[] = [];
  return { lines, log: pino({ level: 'info' }, { write: (line: string) => void lines.push((JSON.parse(line) as { msg: string }).msg) }) };
}

/** The peer's gradient with one NaN (the test hook: a forced non-finite micro-batch). */
function poisoned(p: Peer): Peer['grads'] {
  const g = p.grads.clone();
  g.data[5] = Number.NaN;
  return g;
}

const finite = (data: Float32Array): boolean => data.every(Number.isFinite);

test('a micro-batch with a NaN gradient or an infinite loss is skipped, counted and logged; training goes on with the finite ones', { timeout: 60_000 }, async (t) => {
  const [node] = await startSwarm(t, 2, { runId: 'bad-skip' });
  const { lines, log } = infoLog();
  const peer = unstarted(t, node!, 1, {}, log);
  await peer.collab.start();
  assert.equal((await peer.collab.step(peer.grads, 4, 1, 1)).type, 'accumulated');
  const nan = await peer.collab.step(poisoned(peer), 4, 1, 1);
  const inf = await peer.collab.step(peer.grads, 4, 1, Number.POSITIVE_INFINITY);
  assert.deepEqual({ ...nan, reason: '' }, { type: 'skipped', reason: '', inARow: 1, total: 1 });
  assert.match(nan.type === 'skipped' ? nan.reason : '', /^its gradient \S+\[5\] is NaN$/);
  assert.deepEqual(inf, { type: 'skipped', reason: 'its loss is Infinity', inARow: 2, total: 2 });
  assert.ok(lines.some((l) => /^skipped a micro-batch at epoch 0: its gradient \S+\[5\] is NaN \(1 in a row, 1 in total\)$/.test(l)), lines.join('\n'));
  const s = await trainOneEpoch(peer);
  assert.equal(s.epoch, 1);
  assert.equal(s.loss, 1, 'the epoch loss is the finite micro-batches’ (an infinite one would make it Infinity)');
  assert.ok(finite(peer.params.data), 'the parameters stay finite');
  // the skipped micro-batches added no samples: 32 (the target batch) come from 8 finite ones
  assert.equal(peer.collab.contributed.samples, 32);
  // a finite micro-batch ends the run of bad ones
  const again = await peer.collab.step(poisoned(peer), 4, 1, 1);
  assert.equal(again.type === 'skipped' && again.inARow, 1);
});

test('a peer whose gradients stay non-finite leaves averaging with a logged reason (its partner steps without it) and rejoins with its first finite micro-batch', { timeout: 90_000 }, async (t) => {
  const [nodeA, nodeB] = await startSwarm(t, 2, { runId: 'bad-leave' });
  const { lines, log } = infoLog();
  const a = unstarted(t, nodeA!, 1, { maxBadMicroBatches: 3 }, log);
  const b = unstarted(t, nodeB!, 1, { maxBadMicroBatches: 3 });
  await Promise.all([a.collab.start(), b.collab.start()]);
  const bad: StepOutcome[] = [];
  for (let i = 0; i < 4; i++) bad.push(await a.collab.step(poisoned(a), 4, 1, 1));
  assert.deepEqual(bad.map((o) => o.type === 'skipped' && [o.inARow, o.leftAveraging !== undefined]), [[1, false], [2, false], [3, true], [4, false]]);
  assert.ok(lines.some((l) => /^this peer leaves averaging: its last 3 micro-batches had a non-finite loss or gradient \(last: its gradient \S+\[5\] is NaN\); it goes on computing/.test(l)), lines.join('\n'));
  // the partner's epoch ends without the peer that left: it steps on its own gradients
  const alone = await trainOneEpoch(b);
  assert.equal(alone.epoch, 1);
  assert.equal(alone.averagedWith, 1, 'the peer that left averaging joined the round');
  assert.ok(finite(b.params.data));
  // finite again: it rejoins, catches up with the swarm's epoch and averages with its partner
  const catchUp = await trainOneEpoch(a);
  assert.equal(catchUp.epoch, 1);
  assert.ok(lines.some((l) => l.startsWith('gradients are finite again: this peer rejoins averaging')), lines.join('\n'));
  const together = await Promise.all([trainOneEpoch(a), trainOneEpoch(b)]);
  for (const s of together) assert.equal(s.averagedWith, 2, `both peers averaged epoch ${s.epoch} (${s.reason ?? ''})`);
  assert.ok(finite(a.params.data) && finite(b.params.data));
});

test('a step that leaves non-finite parameters restores the in-memory backup, then the peer loads the swarm’s state', { timeout: 90_000 }, async (t) => {
  const [nodeA, nodeB] = await startSwarm(t, 2, { runId: 'bad-restore' });
  const { lines, log } = infoLog();
  // a broken engine: once `poison` is set, its optimizer step writes a NaN into the parameters
  let poison = false;
  const breaking = (lamb: Optimizer): Optimizer => ({
    get config() {
      return lamb.config;
    },
    get stepCount() {
      return lamb.stepCount;
    },
    step(params, grads, lr) {
      lamb.step(params, grads, lr);
      if (poison) params.data[7] = Number.NaN;
    },
    exportState: () => lamb.exportState(),
    importState: (s) => lamb.importState(s),
    copyMoments: (into, first, end) => lamb.copyMoments(into, first, end),
  });
  const a = unstarted(t, nodeA!, 1, { backupEverySteps: 1 }, log, breaking);
  const b = unstarted(t, nodeB!, 1, { backupEverySteps: 1 });
  await Promise.all([a.collab.start(), b.collab.start()]);
  for (const s of await Promise.all([trainOneEpoch(a), trainOneEpoch(b)])) assert.equal(s.averagedWith, 2);
  const atEpoch1 = a.params.data.slice();
  assert.equal(maxAbsDiff(atEpoch1, b.params.data), 0);

  poison = true;
  const untilRestored = async (): Promise<StepOutcome> => {
    for (let i = 0; i < 400; i++) {
      const o = await a.collab.step(a.grads, 4, 1, 1);
      if (o.type !== 'accumulated') return o;
      await new Promise((r) => setTimeout(r, 40));
    }
    throw new Error('no step within 400 micro-batches');
  };
  const [restored, stepped] = await Promise.all([untilRestored(), trainOneEpoch(b)]);
  poison = false;
  assert.equal(stepped.epoch, 2);
  assert.deepEqual({ ...restored, reason: '' }, { type: 'restored', epoch: 1, reason: '' });
  assert.match(restored.type === 'restored' ? restored.reason : '', /^the optimizer step left NaN in \S+\[\d+\]$/);
  assert.ok(lines.some((l) => /^parameters became non-finite at epoch 2 \(.*\): restored the backup of epoch 1; loading the swarm's state/.test(l)), lines.join('\n'));
  assert.equal(a.collab.epoch, 1);
  assert.equal(maxAbsDiff(a.params.data, atEpoch1), 0, 'the parameters are the backup of epoch 1');
  // re-sync: the swarm (its partner) is ahead, so its next micro-batch loads the state of epoch 2
  let loaded: StepOutcome | undefined;
  for (let i = 0; i < 100 && loaded === undefined; i++) {
    const o = await a.collab.step(a.grads, 4, 1, 1);
    if (o.type === 'loaded' && o.donor !== '') loaded = o;
    else await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual(loaded, { type: 'loaded', epoch: 2, donor: nodeB!.peerId.toString() });
  assert.equal(maxAbsDiff(a.params.data, b.params.data), 0, 'the loaded state is the partner’s');
});
