import assert from 'node:assert/strict';
import { test } from 'node:test';
import { METRIC } from '../../src/store/metric-series.js';
import { StoreView } from '../../src/node/store-view.js';
import { openStore } from '../../src/store/index.js';
import { tmpDir } from '../helpers/tmp.js';

test('newest value per peer follows rows another connection appends, and ignores late-arriving older points', (t) => {
  const dir = tmpDir(t);
  const reader = openStore(dir);
  const writer = openStore(dir); // the training side may write from another process
  t.after(() => {
    reader.close();
    writer.close();
  });
  const view = new StoreView(reader);
  assert.deepEqual(view.latestPerPeer(METRIC.samples), new Map());
  writer.metrics.record([
    { series: METRIC.samples, value: 10, ts: 1000 },
    { series: METRIC.samples, value: 7, ts: 1000, peer: 'p1' },
    { series: METRIC.loss, value: 3, ts: 1000 },
  ]);
  assert.deepEqual(view.latestPerPeer(METRIC.samples), new Map([['', 10], ['p1', 7]]));
  writer.metrics.record([
    { series: METRIC.samples, value: 25, ts: 2000 },
    { series: METRIC.samples, value: 5, ts: 500, peer: 'p1' }, // an old point delivered late
    { series: METRIC.samples, value: 1, ts: 2000, peer: 'p2' },
  ]);
  assert.deepEqual(view.latestPerPeer(METRIC.samples), new Map([['', 25], ['p1', 7], ['p2', 1]]));
  assert.deepEqual(new StoreView(reader).latestPerPeer(METRIC.samples), view.latestPerPeer(METRIC.samples), 'the incremental view equals a fresh full read');
});

test('chart series return the newest points oldest-first, in seconds, for this node only', (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  const t0 = Math.floor(Date.now() / 1000) * 1000; // recent: older points are thinned as they are recorded
  store.metrics.record([
    { series: METRIC.loss, value: 9, ts: t0 + 3000 },
    { series: METRIC.loss, value: 8, ts: t0 + 1000 },
    { series: METRIC.loss, value: 1, ts: t0 + 2000, peer: 'other' },
  ]);
  const view = new StoreView(store);
  assert.deepEqual(view.series('loss'), { series: 'loss', t: [t0 / 1000 + 1, t0 / 1000 + 3], v: [8, 9] });
  assert.deepEqual(view.series('loss', t0 + 2000), { series: 'loss', t: [t0 / 1000 + 3], v: [9] });
});

test('peers: the throughput from progress records read, kept when the peer identifies again; a connected peer is seen now', (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  const now = 10 * 60_000;
  store.peers.seen('relay', ['/ip4/127.0.0.1/tcp/1'], { clientMode: false }, 1000);
  store.peers.reported([{ peerId: 'relay', samplesPerSecond: 12.5, time: now - 2000 }, { peerId: 'client', samplesPerSecond: 3, time: now - 1000 }]);
  store.peers.reported([{ peerId: 'client', samplesPerSecond: 4, time: now - 5000 }]); // an older record read late: no change
  store.peers.seen('client', [], { clientMode: true }, now - 3000); // identify again
  store.peers.seen('coordinator', [], { clientMode: false }, 1000); // identified once, long ago, still connected
  const rows = new StoreView(store).peers(now, ['coordinator']);
  assert.deepEqual(
    rows.map((r) => [r.peerId, r.samplesPerSecond, r.mode, r.lastSeen, r.alive]),
    [
      ['coordinator', null, 'relay', now, true],
      ['client', 3, 'client', now - 1000, true],
      ['relay', 12.5, 'relay', now - 2000, true],
    ],
  );
});
