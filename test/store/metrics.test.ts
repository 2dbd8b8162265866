import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { openStore } from '../../src/store/index.js';
import { METRICS_RETENTION } from '../../src/store/metrics.js';
import { PEERS_KEPT } from '../../src/store/peers.js';
import { tmpDir } from '../helpers/tmp.js';

test('metrics are stored per series and peer, in time order; a non-finite value is reported and skipped, the rest stored', (t) => {
  const skipped: string[] = [];
  const store = openStore(tmpDir(t), { onInvalidMetric: (m) => skipped.push(m) });
  t.after(() => store.close());
  store.metrics.record([
    { series: 'loss', value: 3, ts: 20, peer: 'a', epoch: 1 },
    { series: 'loss', value: 4, ts: 10, peer: 'b', epoch: 1 },
    { series: 'samples_per_second', value: 12.5, ts: 15 },
  ]);
  assert.deepEqual(store.metrics.query('loss').map((m) => [m.ts, m.value, m.peer]), [[10, 4, 'b'], [20, 3, 'a']]);
  assert.deepEqual(store.metrics.query('loss', { peer: 'a' }).map((m) => m.value), [3]);
  assert.deepEqual(store.metrics.query('loss', { since: 15 }).map((m) => m.value), [3]);
  assert.deepEqual(store.metrics.seriesNames(), ['loss', 'samples_per_second']);
  store.metrics.record([{ series: 'loss', value: 1, ts: 30 }, { series: 'loss', value: Number.NaN }, { series: 'loss', value: Infinity, epoch: 2 }, { series: 'loss', value: 2, epoch: -1 }]);
  assert.deepEqual(skipped, ['metric loss: value NaN is not a finite number; point skipped', 'metric loss: value Infinity is not a finite number; point skipped', 'metric loss: epoch -1 is not an epoch; point skipped']);
  assert.deepEqual(store.metrics.query('loss').map((m) => m.value), [4, 3, 1], 'the valid point of the batch is stored');
});

test("prunePeers deletes other peers' points older than the cutoff and keeps this node's", (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  // recent points: older ones (beyond METRICS_RETENTION.fullResolutionMs) are thinned as they are recorded
  const t0 = Date.now();
  store.metrics.record([
    { series: 'samples', value: 1, ts: t0 + 10, peer: 'a' },
    { series: 'samples', value: 2, ts: t0 + 30, peer: 'a' },
    { series: 'epoch', value: 3, ts: t0 + 10 },
  ]);
  assert.equal(store.metrics.prunePeers(t0 + 20), 1);
  assert.deepEqual(store.metrics.query('samples').map((m) => m.ts), [t0 + 30]);
  assert.deepEqual(store.metrics.query('epoch').map((m) => m.ts), [t0 + 10]);
});

test('a run of days keeps every point of the last day and one per series, peer and minute before: the table grows by thinned days, the loss curve and totals stay', (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  const { fullResolutionMs, thinnedEveryMs, passSpanMs } = METRICS_RETENTION;
  const day = 24 * 3_600_000;
  const every = 10_000;
  // days ahead of the clock, so that recording (which thins by the clock) leaves the thinning to this test
  const start = Math.floor(Date.now() / day) * day + day;
  const count = (): number => store.db.prepare('SELECT count(*) FROM metrics').pluck().get() as number;
  const sizes: number[] = [];
  let step = 0;
  // six days of a peer's points (one a second would be ~15 series × 86 400 a day; this keeps the test fast)
  for (let d = 0; d < 6; d++) {
    const points = [];
    for (let ts = start + d * day; ts < start + (d + 1) * day; ts += every, step++) {
      points.push({ series: 'loss', value: 10 / (1 + step), epoch: step, ts }, { series: 'samples', value: step, ts }, { series: 'samples', value: step, ts, peer: 'other' });
    }
    store.metrics.record(points);
    for (let pass = 0; pass <= day / passSpanMs; pass++) store.metrics.thin(start + (d + 1) * day);
    sizes.push(count());
  }
  const now = start + 6 * day;
  const perDay = (3 * day) / every;
  const thinnedPerDay = (3 * day) / thinnedEveryMs;
  assert.equal(fullResolutionMs, day, 'the counts below assume one day at full resolution');
  assert.deepEqual(sizes, [1, 2, 3, 4, 5, 6].map((d) => perDay + (d - 1) * thinnedPerDay), 'each further day adds a thinned day, not a full one');
  const loss = store.metrics.query('loss');
  const old = loss.filter((p) => p.ts < now - day);
  assert.equal(old.length, (5 * day) / thinnedEveryMs, 'one loss point a minute before the last day');
  assert.ok(old.every((p) => p.ts % thinnedEveryMs === thinnedEveryMs - every), 'each is the last point of its minute');
  assert.deepEqual(old[0]?.epoch, thinnedEveryMs / every - 1, 'the curve starts at the first minute of the run');
  assert.equal(loss.filter((p) => p.ts >= now - day).length, day / every, 'the last day is kept whole');
  assert.equal(store.metrics.latest('samples')?.value, step - 1, 'a cumulative series keeps its newest value');
  assert.equal(store.metrics.latest('samples', 'other')?.value, step - 1);
});

test('a point stamped decades ago (a clock that was behind) does not hold thinning up: the next pass thins the points after it', (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  const minute = METRICS_RETENTION.thinnedEveryMs;
  const start = Math.floor((Date.now() - 2 * METRICS_RETENTION.fullResolutionMs) / minute) * minute;
  store.metrics.record([{ series: 'loss', value: -1, ts: 946_684_800_000 }]); // 2000-01-01, a clock reset
  store.metrics.thin();
  store.metrics.record(Array.from({ length: 120 }, (_, i) => ({ series: 'loss', value: i, ts: start + i * 1000 })));
  store.metrics.thin();
  assert.deepEqual(store.metrics.query('loss').map((p) => p.value), [-1, 59, 119]);
});

test('recording thins what is older than the full-resolution window', (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  const minute = METRICS_RETENTION.thinnedEveryMs;
  const start = Math.floor((Date.now() - 2 * METRICS_RETENTION.fullResolutionMs) / minute) * minute;
  store.metrics.record(Array.from({ length: 600 }, (_, i) => ({ series: 'loss', value: i, ts: start + i * 1000 })));
  assert.deepEqual(
    store.metrics.query('loss').map((p) => p.value),
    Array.from({ length: 10 }, (_, m) => m * 60 + 59),
  );
});

test('settings are validated on write and on read; peers keep first and last seen', (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  const threads = z.number().int().min(1);
  store.settings.set('maxThreads', 4, threads);
  assert.equal(store.settings.get('maxThreads', threads), 4);
  assert.throws(() => store.settings.set('maxThreads', 0, threads));
  assert.throws(() => store.settings.get('maxThreads', z.string()), /stored setting "maxThreads" is invalid/);
  assert.equal(store.settings.get('absent', threads), undefined);

  store.peers.seen('peerA', ['/ip4/127.0.0.1/tcp/1'], {}, 100);
  store.peers.seen('peerB', [], {}, 150);
  store.peers.seen('peerA', ['/ip4/127.0.0.1/tcp/2'], { clientMode: true }, 200);
  const [a, b] = store.peers.list();
  assert.equal(a?.peerId, 'peerA');
  assert.equal(a?.firstSeen, 100);
  assert.equal(a?.lastSeen, 200);
  assert.deepEqual(a?.addrs, ['/ip4/127.0.0.1/tcp/2']);
  assert.equal(b?.peerId, 'peerB');
});

test('the peers table keeps the most recently seen PEERS_KEPT, however many identities connect or report', (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  const count = (): number => store.db.prepare('SELECT count(*) FROM peers').pluck().get() as number;
  store.peers.seen('early', [], {}, 1);
  for (let i = 0; i < PEERS_KEPT + 50; i++) store.peers.seen(`id-${i}`, [], {}, 1000 + i);
  assert.equal(count(), PEERS_KEPT);
  const ids = new Set(store.peers.list().map((p) => p.peerId));
  assert.ok(!ids.has('early') && !ids.has('id-49') && ids.has('id-50') && ids.has(`id-${PEERS_KEPT + 49}`), 'the least recently seen are forgotten');
  store.peers.reported(Array.from({ length: 20 }, (_, i) => ({ peerId: `reporter-${i}`, samplesPerSecond: 1, time: 10_000 + i })));
  assert.equal(count(), PEERS_KEPT);
  assert.ok(store.peers.list().some((p) => p.peerId === 'reporter-19'));
});
