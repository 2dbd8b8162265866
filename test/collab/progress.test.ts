import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backedReports } from '../../src/collab/backed-progress.js';
import { globalProgress, progressLine, PROGRESS_LIMITS, readyForStep, reportTimeIsCurrent, type PeerProgress } from '../../src/collab/progress.js';

const peer = (peerId: string, epoch: number, samples: number, samplesPerSecond: number, time: number): PeerProgress => ({ peerId, epoch, samples, samplesPerSecond, time, clientMode: false });

test('global progress sums samples at the swarm epoch and extrapolates them to now', () => {
  const now = 10_000;
  const p = globalProgress([peer('a', 3, 100, 10, now - 2000), peer('b', 3, 50, 5, now), peer('late', 2, 999, 20, now)], now, { targetBatchSize: 1000 });
  assert.equal(p.epoch, 3);
  assert.equal(p.samples, 150, 'the peer behind the swarm epoch does not add samples');
  assert.equal(p.estimatedSamples, 170, 'a 2 s old report at 10 samples/s adds 20');
  assert.equal(p.samplesPerSecond, 35, 'but its throughput counts: it is about to catch up');
  assert.equal(p.eta, (1000 - 170) / 35);
  assert.equal(p.peers, 3);
  assert.equal(readyForStep(p), false);
  // the line shows what the peers reported, as hivemind's; the extrapolation is in the ETA
  assert.match(progressLine(p), /^Collaboration accumulated 150 samples from 3 peers; ETA 23\.71 seconds \(refresh in \d+\.\d\d s\)$/);
});

test('a swarm averaging its target batch (no peer reports meanwhile) shows the samples reported, not their extrapolation past the target', () => {
  // two peers reported 16 of 32 samples each at 10 samples/s a minute ago, then went into averaging
  const now = 100_000;
  const p = globalProgress([peer('a', 2, 16, 10, now - 60_000), peer('b', 2, 16, 10, now - 60_000)], now, { targetBatchSize: 32 });
  assert.equal(p.estimatedSamples, 32 + 2 * 60 * 10, 'the extrapolation grows on');
  assert.equal(p.samples, 32);
  assert.match(progressLine(p), /^Collaboration accumulated 32 samples from 2 peers; ETA 0\.00 seconds/);
  assert.equal(readyForStep(p), true);
  // reports a micro-batch short of the target (a peer's last report is throttled): ready by throughput, the figure stays true
  const short = globalProgress([peer('a', 2, 12, 10, now - 60_000), peer('b', 2, 16, 10, now - 60_000)], now, { targetBatchSize: 32 });
  assert.deepEqual([short.samples, readyForStep(short), short.eta], [28, true, 0]);
  assert.match(progressLine(short), /accumulated 28 samples/);
});

test('a peer that left keeps the epoch it reached but adds no samples, throughput or peer', () => {
  const now = 10_000;
  const p = globalProgress([peer('a', 4, 20, 10, now), { ...peer('gone', 5, 80, 50, now), left: true }], now, { targetBatchSize: 100 });
  assert.equal(p.epoch, 5, 'the run reached epoch 5');
  assert.deepEqual([p.samples, p.samplesPerSecond, p.peers], [0, 10, 1]);
  const empty = globalProgress([{ ...peer('gone', 5, 80, 50, now), left: true }], now, { targetBatchSize: 100 });
  assert.deepEqual([empty.epoch, empty.peers, empty.eta], [5, 0, Infinity]);
});

test('the refresh period shrinks as the epoch nears its end, within bounds', () => {
  const now = 0;
  const far = globalProgress([peer('a', 0, 0, 1, now)], now, { targetBatchSize: 10_000 });
  const near = globalProgress([peer('a', 0, 9990, 100, now)], now, { targetBatchSize: 10_000 });
  assert.equal(far.refreshIn, 30);
  assert.equal(near.refreshIn, 0.5);
  const mid = globalProgress([peer('a', 0, 0, 10, now), peer('b', 0, 0, 10, now)], now, { targetBatchSize: 100 });
  assert.equal(mid.refreshIn, (5 * 2) / 5, 'eta × peers ÷ expected max peers (2 + 3 drift)');
});

test('reaching the target means ETA 0 and ready; no reports or no throughput means unknown ETA', () => {
  const done = globalProgress([peer('a', 1, 600, 1, 0), peer('b', 1, 500, 1, 0)], 0, { targetBatchSize: 1000 });
  assert.equal(done.eta, 0);
  assert.equal(readyForStep(done), true);
  assert.equal(globalProgress([], 0, { targetBatchSize: 10 }).eta, Infinity);
  const stalled = globalProgress([peer('a', 0, 1, 0, 0)], 0, { targetBatchSize: 10 });
  assert.equal(stalled.eta, Infinity);
  assert.match(progressLine(stalled), /ETA unknown seconds/);
});

test('batch_size_lead makes the swarm ready that many samples before the target', () => {
  // 2 peers, 900 of 1000 samples
  const p = globalProgress([peer('a', 0, 450, 5, 0), peer('b', 0, 450, 5, 0)], 0, { targetBatchSize: 1000 });
  assert.equal(readyForStep(p), false);
  assert.equal(readyForStep(p, 99), false);
  assert.equal(readyForStep(p, 100), true);
});

test('backedReports keeps reports up to the floor or one epoch past the newest advertised state, and sets aside the rest', () => {
  const at = (epoch: number) => peer(`p${epoch}`, epoch, 0, 0, 0);
  const reports = [at(2), at(3), at(7), at(8), at(1_000_000)];
  const ids = (r: { kept: PeerProgress[]; setAside: PeerProgress[] }) => [r.kept.map((p) => p.epoch), r.setAside.map((p) => p.epoch)];
  // a state of epoch 7 is advertised: a peer at 8 stepped before re-advertising; 10⁶ has no state behind it
  assert.deepEqual(ids(backedReports(reports, 3, 7)), [[2, 3, 7, 8], [1_000_000]]);
  // nothing advertised: only what the caller reaches without a download (its epoch + 1) counts
  assert.deepEqual(ids(backedReports(reports, 3, undefined)), [[2, 3], [7, 8, 1_000_000]]);
  // an advertised state behind the floor does not lower it
  assert.deepEqual(ids(backedReports(reports, 8, 2)), [[2, 3, 7, 8], [1_000_000]]);
});

test('reports beyond the realistic ranges are clamped, so sums stay finite, and a report is extrapolated for at most maxAgeMs', () => {
  const now = 1_000_000_000;
  const p = globalProgress([peer('a', 0, Number.MAX_VALUE, Number.MAX_VALUE, now), peer('b', 0, Number.MAX_VALUE, Number.MAX_VALUE, now), peer('nan', 0, Number.NaN, Number.NaN, now)], now, { targetBatchSize: 10 });
  assert.deepEqual([p.samples, p.samplesPerSecond], [2 * PROGRESS_LIMITS.samples, 2 * PROGRESS_LIMITS.samplesPerSecond]);
  const old = globalProgress([peer('a', 0, 0, 2, 0)], now, { targetBatchSize: 1e12 });
  assert.equal(old.estimatedSamples, (PROGRESS_LIMITS.maxAgeMs / 1000) * 2);
});

test('a report is current within the clock skew ahead of now and maxAgeMs behind it', () => {
  const now = 1_000_000_000;
  assert.equal(reportTimeIsCurrent(now + 2_999, now), true);
  assert.equal(reportTimeIsCurrent(now + 3_001, now), false);
  assert.equal(reportTimeIsCurrent(now - PROGRESS_LIMITS.maxAgeMs, now), true);
  assert.equal(reportTimeIsCurrent(now - PROGRESS_LIMITS.maxAgeMs - 1, now), false);
});
