import assert from 'node:assert/strict';
import { test } from 'node:test';
import { THROUGHPUT_SLACK, creditContribution, leaderboard } from '../../src/collab/contribution.js';

test('an honest claim is credited in full', () => {
  const c = creditContribution({ peerId: 'a', claimedSamples: 400, measuredSamplesPerSecond: 10, activeSeconds: 40, averagedWeight: 400 });
  assert.equal(c.credited, 400);
  assert.equal(c.flag, undefined);
});

test('a claim of 10× the real samples is capped by measured throughput and flagged', () => {
  const c = creditContribution({ peerId: 'cheat', claimedSamples: 4000, measuredSamplesPerSecond: 10, activeSeconds: 40 });
  assert.equal(c.credited, 10 * 40 * THROUGHPUT_SLACK);
  assert.match(c.flag!, /claimed 4000 samples: more than 1\.5× its measured 10\.0 samples\/s over 40 s/);
});

test('the all-reduce weight caps a claim when it is the tighter bound', () => {
  const c = creditContribution({ peerId: 'b', claimedSamples: 500, measuredSamplesPerSecond: 100, activeSeconds: 100, averagedWeight: 256 });
  assert.equal(c.credited, 256);
  assert.match(c.flag!, /more than the 256 samples it averaged with/);
});

test('nonsense claims credit nothing', () => {
  for (const claimed of [-5, Number.NaN, Infinity]) {
    const c = creditContribution({ peerId: 'x', claimedSamples: claimed, measuredSamplesPerSecond: 10, activeSeconds: 10 });
    assert.equal(c.credited, 0);
    assert.match(c.flag!, /not a count/);
  }
});

test('the leaderboard groups by display name, ranks, sums compute hours, and shares sum to one', () => {
  const rows = leaderboard([
    { peerId: 'p1', displayName: 'ada', credited: 100, computeSeconds: 1800 },
    { peerId: 'p2', displayName: 'ada', credited: 50, computeSeconds: 3600 },
    { peerId: 'p3', credited: 300 },
    { peerId: 'p4', displayName: 'bo', credited: 50, computeSeconds: 360 },
  ]);
  assert.deepEqual(rows.map((r) => [r.name, r.samples, r.computeHours, r.rank]), [['p3', 300, 0, 1], ['ada', 150, 1.5, 2], ['bo', 50, 0.1, 3]]);
  assert.ok(Math.abs(rows.reduce((s, r) => s + r.share, 0) - 1) < 1e-12);
});
