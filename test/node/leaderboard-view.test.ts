import assert from 'node:assert/strict';
import { test } from 'node:test';
import { leaderboard } from '../../src/collab/contribution.js';
import { leaderboardRecordSchema, type LeaderboardRecord } from '../../src/collab/records.js';
import { createLogger } from '../../src/log/logger.js';
import { NodeController } from '../../src/node/controller.js';
import { METRIC } from '../../src/store/metric-series.js';
import type { SwarmPresence } from '../../src/training/service.js';
import { openStore } from '../../src/store/index.js';
import { tmpDir } from '../helpers/tmp.js';

const log = createLogger({ logLevel: 'silent', logFormat: 'json' });
const ME = '12D3KooWMePeer';

/** A leaderboard record as a coordinator publishes it: its credits through the real leaderboard(), checked by the record schema. */
function coordinatorRecord(time: number): LeaderboardRecord {
  const rows = leaderboard([
    { peerId: '12D3KooWAlice', displayName: 'alice', credited: 600, computeSeconds: 7200 },
    { peerId: ME, credited: 300, computeSeconds: 3600 },
    { peerId: '12D3KooWBob', displayName: 'bob', credited: 100 },
    { peerId: ME, credited: 100, computeSeconds: 1800 },
  ]);
  return leaderboardRecordSchema.parse({ time, rows, flagged: 0 });
}

test('My contribution shows a coordinator\'s top contributors and takes this volunteer\'s share and rank from them', async (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  // this node's own records: it alone has contributed, so locally it is #1 with all of the run
  store.metrics.record([{ series: METRIC.samples, value: 400, ts: 1 }]);
  let board: LeaderboardRecord | null = null;
  const swarm: SwarmPresence = { reachability: () => 'public', peerId: () => ME, leaderboard: () => board, connectedPeers: () => [], notices: () => [] };
  const c = new NodeController({ store, log, version: '0', swarm, refreshMs: 60_000 });
  t.after(() => c.close());

  const alone = (await c.getSnapshot()).mine;
  assert.equal(alone.leaderboard, null, 'no leaderboard found yet');
  assert.deepEqual([alone.share, alone.rank], [1, 1]);

  board = coordinatorRecord(5000);
  c.refresh();
  const mine = (await c.getSnapshot()).mine;
  assert.equal(mine.leaderboard?.updatedAt, 5000);
  assert.deepEqual(
    mine.leaderboard?.rows.map((r) => [r.rank, r.name, r.samples, r.computeHours, r.me]),
    [
      [1, 'alice', 600, 2, false],
      [2, ME, 400, 1.5, true],
      [3, 'bob', 100, 0, false],
    ],
    'anonymous: this volunteer is the row of its peer id',
  );
  assert.equal(mine.share, 400 / 1100, 'the share the coordinator credited');
  assert.equal(mine.rank, 2);
  assert.equal(mine.contributors, 3);
  assert.equal(mine.samples, 400, 'own samples stay this node\'s measured ones');

  // with a display name, the coordinator names this volunteer by it
  assert.ok((await c.updateSettings({ displayName: 'bob' })).ok);
  const named = (await c.getSnapshot()).mine;
  assert.deepEqual(named.leaderboard?.rows.filter((r) => r.me).map((r) => r.name), ['bob']);
  assert.deepEqual([named.share, named.rank], [100 / 1100, 3]);

  // a leaderboard that does not list this volunteer leaves its own numbers
  assert.ok((await c.updateSettings({ displayName: 'carol' })).ok);
  const unlisted = (await c.getSnapshot()).mine;
  assert.deepEqual([unlisted.share, unlisted.rank], [1, 1]);
  assert.ok(unlisted.leaderboard?.rows.every((r) => !r.me));
});
