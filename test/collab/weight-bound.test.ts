import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PeerProgress } from '../../src/collab/progress.js';
import { ObservedProgress } from '../../src/collab/weight-bound.js';

const report = (peerId: string, epoch: number, samples: number, samplesPerSecond: number, time: number): PeerProgress => ({ peerId, epoch, samples, samplesPerSecond, time, clientMode: false });

test('a peer’s weight bound: the most samples seen in the epoch, twice its rate since (for a record’s lifetime at most), 1/8 of the target; twice the target for a peer not seen yet, and never above', () => {
  const o = new ObservedProgress({ targetBatchSize: 160, maxStaleSeconds: 30 });
  const t0 = 1_000_000;
  o.observe([report('a', 3, 50, 2, t0), report('b', 3, 100, 1000, t0)]);
  assert.equal(o.bound('a', 3, t0), 50 + 20, 'at the record: its samples and 1/8 of the target');
  assert.equal(o.bound('a', 3, t0 + 5000), 50 + 20 + 2 * 2 * 5, 'twice its reported rate over the 5 s since');
  assert.equal(o.bound('a', 3, t0 + 600_000), 50 + 20 + 2 * 2 * 30, 'the rate counts for a record’s lifetime at most');
  assert.equal(o.bound('b', 3, t0 + 10_000), 320, 'never above twice the target');
  assert.equal(o.bound('nobody', 3, t0), 320, 'a peer never seen: nothing to judge by, twice the target');
  assert.equal(o.bound('a', 4, t0), 20, 'samples of another epoch do not count');
  assert.equal(o.bound('a', 4, t0 + 5000), 20 + 2 * 2 * 5, 'no record of epoch 4 yet: its rate from the epoch-3 record, over the time since');
  assert.equal(o.bound('a', 2, t0 + 5000), 320, 'a later epoch gives no rate to an earlier one');
  // a later read with fewer samples (a stale holder's copy) does not lower what was seen
  o.observe([report('a', 3, 20, 2, t0 + 1000)]);
  assert.equal(o.bound('a', 3, t0), 70);
  // epochs more than 2 behind the newest seen are forgotten, and a peer with none left with them
  o.observe([report('b', 6, 0, 1, t0)]);
  assert.equal(o.bound('a', 3, t0), 320, 'forgotten: as a peer not seen');
  o.observe([report('c', 6, 30, 0, t0), { ...report('d', 6, 1e6, 0, t0), left: true }]);
  assert.equal(o.bound('c', 6, t0 + 5000), 320, 'a record of 0 samples/s (a peer that has not timed a micro-batch yet) gives no rate: as a peer not seen');
  o.observe([report('c', 5, 10, 3, t0)]);
  assert.equal(o.bound('c', 6, t0 + 5000), 30 + 20 + 2 * 3 * 5, 'its rate from the newest earlier record that has one');
  assert.equal(o.bound('d', 6, t0), 320, 'a report of a peer that left is no progress: as a peer not seen');
});
