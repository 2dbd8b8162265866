import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openStore } from '../../src/store/index.js';
import { tmpDir } from '../helpers/tmp.js';

const baseline = (time: number) => ({ time, totalSamples: time / 10, epoch: 1, samplesInEpoch: 0, computeSeconds: time / 1000 });

test('a step is credited once per (run, peer, epoch); totals, flags, baselines and names survive reopening; runs stay apart', (t) => {
  const dir = tmpDir(t);
  let store = openStore(dir);
  const c = store.contributions;
  assert.equal(c.credit({ runId: 'r1', peerId: 'p1', epoch: 0, displayName: 'ada', claimed: 40, credited: 40, computeSeconds: 8, ts: 1000 }, baseline(1000)), true);
  assert.equal(c.credit({ runId: 'r1', peerId: 'p2', epoch: 0, claimed: 400, credited: 40, computeSeconds: 8, flag: 'claimed 400 samples: too many', ts: 1001 }, baseline(1001)), true);
  // the same step again (e.g. seen by a restarted coordinator) changes nothing, baseline included
  assert.equal(c.credit({ runId: 'r1', peerId: 'p1', epoch: 0, displayName: 'ada', claimed: 40, credited: 40, computeSeconds: 8, ts: 2000 }, baseline(2000)), false);
  // epoch 0 of another run with the same peer is another step
  assert.equal(c.credit({ runId: 'r2', peerId: 'p1', epoch: 0, displayName: 'ada', claimed: 10, credited: 10, computeSeconds: 1, ts: 2500 }, baseline(2500)), true);
  store.close();
  store = openStore(dir);
  t.after(() => store.close());
  const r = store.contributions;
  assert.equal(r.isCredited('r1', 'p1', 0), true);
  assert.equal(r.isCredited('r1', 'p1', 1), false);
  assert.equal(r.isCredited('r3', 'p1', 0), false);
  assert.equal(r.lastCreditedEpoch('r1'), 0);
  assert.equal(r.lastCreditedEpoch('r3'), undefined);
  assert.deepEqual(r.peerState('r1', 'p1'), { baseline: baseline(1000), credited: 40 });
  assert.deepEqual(r.peerState('r2', 'p1'), { baseline: baseline(2500), credited: 10 });
  assert.deepEqual(r.peerState('r3', 'p1'), { credited: 0 });
  assert.deepEqual(r.displayNames(), new Map([['p1', 'ada']]));
  r.credit({ runId: 'r1', peerId: 'p1', epoch: 1, displayName: 'ada2', claimed: 30, credited: 30, computeSeconds: 6, ts: 3000 }, baseline(3000));
  assert.deepEqual(r.displayNames(), new Map([['p1', 'ada2']]));
  assert.deepEqual(r.totals({ runId: 'r1' }), [
    { runId: 'r1', peerId: 'p1', displayName: 'ada2', claimed: 70, credited: 70, computeSeconds: 14, steps: 2, flaggedSteps: 0 },
    { runId: 'r1', peerId: 'p2', claimed: 400, credited: 40, computeSeconds: 8, steps: 1, flaggedSteps: 1 },
  ]);
  assert.deepEqual(r.totals().map((x) => [x.runId, x.peerId, x.credited]), [['r1', 'p1', 70], ['r1', 'p2', 40], ['r2', 'p1', 10]]);
  assert.deepEqual(r.totals({ since: 2000 }).map((x) => [x.runId, x.peerId, x.credited]), [['r1', 'p1', 30], ['r2', 'p1', 10]]);
  assert.deepEqual(r.credits({ flaggedOnly: true }).map((x) => [x.peerId, x.flag]), [['p2', 'claimed 400 samples: too many']]);
  assert.deepEqual(r.credits({ runId: 'r2' }).map((x) => [x.peerId, x.epoch]), [['p1', 0]]);
});
