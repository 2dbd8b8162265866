import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openStore } from '../../src/store/index.js';
import { tmpDir } from '../helpers/tmp.js';

const baseline = (time: number) => ({ time, totalSamples: time / 10, epoch: 1, samplesInEpoch: 0, computeSeconds: time / 1000 });

test('a step is credited once per (peer, epoch); totals, flags, baselines and names survive reopening', (t) => {
  const dir = tmpDir(t);
  let store = openStore(dir);
  assert.equal(store.contributions.credit({ peerId: 'p1', epoch: 0, displayName: 'ada', claimed: 40, credited: 40, computeSeconds: 8, ts: 1000 }, baseline(1000)), true);
  assert.equal(store.contributions.credit({ peerId: 'p2', epoch: 0, claimed: 400, credited: 40, computeSeconds: 8, flag: 'claimed 400 samples: too many', ts: 1001 }, baseline(1001)), true);
  // the same step again (e.g. seen by a restarted coordinator) changes nothing, baseline included
  assert.equal(store.contributions.credit({ peerId: 'p1', epoch: 0, displayName: 'ada', claimed: 40, credited: 40, computeSeconds: 8, ts: 2000 }, baseline(2000)), false);
  store.close();
  store = openStore(dir);
  t.after(() => store.close());
  assert.equal(store.contributions.isCredited('p1', 0), true);
  assert.equal(store.contributions.isCredited('p1', 1), false);
  assert.deepEqual(store.contributions.baselines().get('p1'), baseline(1000));
  assert.deepEqual(store.contributions.displayNames(), new Map([['p1', 'ada']]));
  store.contributions.credit({ peerId: 'p1', epoch: 1, displayName: 'ada2', claimed: 30, credited: 30, computeSeconds: 6, ts: 3000 }, baseline(3000));
  assert.deepEqual(store.contributions.totals(), [
    { peerId: 'p1', displayName: 'ada2', claimed: 70, credited: 70, computeSeconds: 14, steps: 2, flaggedSteps: 0 },
    { peerId: 'p2', claimed: 400, credited: 40, computeSeconds: 8, steps: 1, flaggedSteps: 1 },
  ]);
  assert.deepEqual(store.contributions.totals({ since: 2000 }).map((r) => [r.peerId, r.credited]), [['p1', 30]]);
  assert.deepEqual(store.contributions.credits({ flaggedOnly: true }).map((c) => [c.peerId, c.flag]), [['p2', 'claimed 400 samples: too many']]);
});
