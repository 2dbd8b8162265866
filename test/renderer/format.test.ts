import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DASH, batchProgress, describeAveraging, formatFetch, formatDuration, formatFixed, formatInteger, formatPercent, formatStanding, remainingSeconds, shortPeerId } from '../../src/renderer/src/lib/format.js';

test('unknown numbers show a dash; known ones keep a fixed number of decimals', () => {
  assert.equal(formatInteger(null), DASH);
  assert.equal(formatInteger(1234567.6), '1,234,568');
  assert.equal(formatFixed(2, 3), '2.000');
  assert.equal(formatFixed(null, 1), DASH);
  assert.equal(formatPercent(0.18613), '18.6 %');
});

test('durations read naturally and pad minutes/seconds so their width is stable', () => {
  assert.equal(formatDuration(42.4), '42 s');
  assert.equal(formatDuration(75), '1 min 15 s');
  assert.equal(formatDuration(65), '1 min 05 s');
  assert.equal(formatDuration(7260), '2 h 01 min');
  assert.equal(formatDuration(-1), DASH);
  assert.equal(formatDuration(Number.POSITIVE_INFINITY), DASH);
});

test('batch progress is clamped and unknown without both numbers; peer ids keep both ends', () => {
  assert.equal(batchProgress(1024, 4096), 0.25);
  assert.equal(batchProgress(5000, 4096), 1);
  assert.equal(batchProgress(null, 4096), null);
  assert.equal(batchProgress(10, 0), null);
  assert.equal(shortPeerId('12D3KooWJdNzxz4Tk2VdgRKqpMhCKbqZV8zHGyc5WmB7X1Fh2abc'), '12D3KooW…Fh2abc');
  assert.equal(shortPeerId('short'), 'short');
});

test('the ETA counts down from when it was estimated and stops at zero', () => {
  assert.equal(remainingSeconds(60, 10_000, 25_000), 45);
  assert.equal(remainingSeconds(60, 10_000, 100_000), 0);
  assert.equal(remainingSeconds(60, 10_000, 5_000), 60, 'a clock behind the estimate does not add time');
  assert.equal(remainingSeconds(null, 10_000, 25_000), null);
  assert.equal(remainingSeconds(60, null, 25_000), null);
});

test('the run data’s fetch reads as bytes, percent, shards, rate and time left; done once every shard arrived', () => {
  const p = { datasetId: 'a'.repeat(64), bytes: 12 * 2 ** 20, totalBytes: 48 * 2 ** 20, shardsDone: 6, shardsTotal: 24, bytesPerSecond: 4.1 * 2 ** 20, etaSeconds: 75 };
  assert.equal(formatFetch(p), '12.0 of 48.0 MB (25 %) · 6/24 shards · 4.1 MB/s · 1 min 15 s left');
  assert.equal(formatFetch({ ...p, etaSeconds: null }), '12.0 of 48.0 MB (25 %) · 6/24 shards · 4.1 MB/s · time left unknown');
  assert.equal(formatFetch({ ...p, bytes: p.totalBytes, shardsDone: 24, etaSeconds: 0 }), '48.0 of 48.0 MB (100 %) · 24/24 shards · 4.1 MB/s · done');
});

const NO_ROUND = { averagingEpoch: null, averagingMode: null, averagingCompression: null, averagingBytesSent: null, averagingBusySeconds: null, averagingBusySecondsPerGb: null };
const plain = { ...NO_ROUND, averagingEpoch: 12, averagingMode: 'plain', averagingCompression: 1, averagingBytesSent: 4_000_000 } as const;

test("the swarm panel's averaging line: the run's mode and its latest epoch's bytes sent and compression, then busy seconds per round and per GB, each when known, or once that no round ran yet", () => {
  assert.equal(describeAveraging(NO_ROUND), 'no round yet', 'said once, not once per part');
  assert.equal(describeAveraging(plain), 'plain, 4.00 MB sent in epoch 12');
  assert.equal(describeAveraging({ ...plain, averagingBusySeconds: 0.4123, averagingBusySecondsPerGb: 1.18 }), 'plain, 4.00 MB sent in epoch 12; 0.41 CPU-s per round (1.2 s/GB)');
  assert.equal(describeAveraging({ ...NO_ROUND, averagingBusySeconds: 0.4123 }), '0.41 CPU-s per round');
  assert.equal(describeAveraging({ ...plain, averagingMode: 'powersgd', averagingCompression: 9.84, averagingBytesSent: 412_000 }), 'PowerSGD, 0.41 MB sent in epoch 12, 9.8× fewer values');
  // a DiLoCo round sends its pseudo-gradient as it is (compression 1): the mode, not the ratio, names it
  assert.equal(describeAveraging({ ...plain, averagingMode: 'diloco' }), 'DiLoCo, 4.00 MB sent in epoch 12');
  // an epoch whose rounds all failed (a local step) has bytes but no compression: the panel says so, not the last epoch's ratio
  assert.equal(describeAveraging({ ...plain, averagingMode: 'powersgd', averagingCompression: null, averagingBytesSent: 0 }), 'PowerSGD, nothing averaged in epoch 12');
  assert.equal(describeAveraging({ ...plain, averagingMode: 'powersgd', averagingCompression: null, averagingBytesSent: 200_000 }), 'PowerSGD, 0.20 MB sent in epoch 12, nothing averaged', 'a failed PowerSGD phase sent bytes');
});

test('share and rank show only with another contributor or a leaderboard: training alone they are not "100.0 %" and "#1 of 1"', () => {
  assert.equal(formatStanding({ share: 1, rank: 1, contributors: 1, leaderboard: null }), null);
  assert.equal(formatStanding({ share: null, rank: null, contributors: 0, leaderboard: null }), null);
  assert.deepEqual(formatStanding({ share: 0.25, rank: 2, contributors: 3, leaderboard: null }), { share: '25.0 %', rank: '#2 of 3' });
  // a coordinator's leaderboard counts the run even when it lists this node alone
  assert.deepEqual(formatStanding({ share: 1, rank: 1, contributors: 1, leaderboard: { rows: [], updatedAt: 0 } }), { share: '100.0 %', rank: '#1 of 1' });
  assert.deepEqual(formatStanding({ share: 0.5, rank: null, contributors: 2, leaderboard: null }), { share: '50.0 %', rank: DASH });
});
