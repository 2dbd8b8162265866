import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { openStore } from '../../src/store/index.js';
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
  store.metrics.record([
    { series: 'samples', value: 1, ts: 10, peer: 'a' },
    { series: 'samples', value: 2, ts: 30, peer: 'a' },
    { series: 'epoch', value: 3, ts: 10 },
  ]);
  assert.equal(store.metrics.prunePeers(20), 1);
  assert.deepEqual(store.metrics.query('samples').map((m) => m.ts), [30]);
  assert.deepEqual(store.metrics.query('epoch').map((m) => m.ts), [10]);
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
