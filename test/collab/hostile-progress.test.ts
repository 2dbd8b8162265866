// Progress records from one hostile identity (issue 23, attack 1), with real swarm nodes on loopback
// and the coordinator polled in-process: values out of range, extra subkeys, a time in the future;
// and a leaderboard of its own, stamped in the future or newer than the coordinator's.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { Coordinator } from '../../src/collab/coordinator.js';
import { globalProgress } from '../../src/collab/progress.js';
import { currentProgress, LEADERBOARD_NAMESPACE, latestLeaderboard, leaderboardRecords, PROGRESS_KEY, PROGRESS_NAMESPACE, progressRecords } from '../../src/collab/records.js';
import { METRIC } from '../../src/store/metric-series.js';
import { openStore } from '../../src/store/index.js';
import { warningLog } from '../helpers/log.js';
import { publishProgress } from '../helpers/progress.js';
import { startSwarm } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

const RUN = 'hostile-progress';

test('out-of-range progress values, extra subkeys and future times from a hostile peer neither crash the coordinator nor count; old per-peer rows are pruned', { timeout: 60_000 }, async (t) => {
  const [coordinatorNode, honest, attacker] = await startSwarm(t, 3, { runId: RUN });
  const dataDir = tmpDir(t);
  const skipped: string[] = [];
  const store = openStore(dataDir, { onInvalidMetric: (m) => skipped.push(m) });
  const { warnings, log } = warningLog();
  const coordinator = new Coordinator({ node: coordinatorNode!, store, dataDir, log, targetBatchSize: 1000, refresh: 60, checkpointEvery: 0 });
  t.after(async () => {
    await coordinator.stop();
    store.close();
  });
  const now = Date.now();
  // a peer last seen 8 days ago: its per-peer rows are past the retention
  store.metrics.record([{ series: METRIC.samplesPerSecond, value: 3, ts: now - 8 * 24 * 3_600_000, peer: 'gone' }]);
  await publishProgress(honest!, { epoch: 0, samples: 8, samplesPerSecond: 4, time: now });
  // a modified client: its node signs whatever it likes under the progress key (up to 16 subkeys per owner)
  const forged = attacker!.registerNamespace(PROGRESS_NAMESPACE, z.record(z.string(), z.unknown()));
  const fake = { epoch: 0, samples: 500, samplesPerSecond: 1000, time: now, clientMode: false, totalSamples: 0, computeSeconds: 0 };
  // two of these summed to Infinity, which the store refused by throwing out of the poll
  for (const subkey of ['', 'max']) await forged.store(PROGRESS_KEY, subkey, { ...fake, samplesPerSecond: Number.MAX_VALUE }, now + 60_000);
  for (let i = 0; i < 10; i++) await forged.store(PROGRESS_KEY, `s${i}`, fake, now + 60_000);
  for (let i = 0; i < 3; i++) await forged.store(PROGRESS_KEY, `future${i}`, { ...fake, time: now + 3_600_000 }, now + 60_000);

  await coordinator.poll();
  await coordinator.poll();
  assert.deepEqual(store.metrics.query(METRIC.peersAlive, { peer: '' }).map((p) => p.value), [1, 1], 'only the honest peer counts');
  assert.deepEqual(store.metrics.query(METRIC.swarmSamplesPerSecond, { peer: '' }).map((p) => p.value), [4, 4]);
  assert.deepEqual(store.metrics.seriesNames().filter((s) => s === METRIC.samplesPerSecond).length, 1);
  assert.deepEqual([...new Set(store.metrics.query(METRIC.samplesPerSecond).map((p) => p.peer))], [honest!.peerId.toString()], 'no per-peer metric row of an attacker, none past the retention');
  assert.deepEqual(skipped, []);
  assert.deepEqual(warnings, []);

  // what a training peer computes from the same records: finite, one peer
  const entries = await progressRecords(honest!).get(PROGRESS_KEY);
  const g = globalProgress(currentProgress(entries, Date.now()).map((e) => ({ peerId: e.owner, ...e.value })), Date.now(), { targetBatchSize: 1000 });
  assert.equal(g.peers, 1);
  assert.ok(Number.isFinite(g.samplesPerSecond) && g.samplesPerSecond === 4, `samples/s ${g.samplesPerSecond}`);
  assert.ok(g.eta > 0, 'the attacker does not drive the ETA to 0');
});

test('the coordinator forgets a peer whose reports stopped counting, and tracks it again once it reports', { timeout: 60_000 }, async (t) => {
  const [coordinatorNode, peer] = await startSwarm(t, 2, { runId: `${RUN}-forget` });
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  const coordinator = new Coordinator({ node: coordinatorNode!, store, dataDir, log: warningLog().log, targetBatchSize: 1000, refresh: 60, checkpointEvery: 0 });
  t.after(async () => {
    await coordinator.stop();
    store.close();
  });
  const now = Date.now();
  await publishProgress(peer!, { epoch: 1, samples: 8, time: now });
  await coordinator.poll(now);
  assert.equal(coordinator.trackedPeers, 1);
  // eleven minutes on, its report (measured at `now`) no longer counts: nothing of it is held
  // (its baseline and credits come back from the store, as coordinator-restart.test.ts shows)
  await coordinator.poll(now + 11 * 60_000);
  assert.equal(coordinator.trackedPeers, 0);
  await coordinator.poll(now);
  assert.equal(coordinator.trackedPeers, 1);
});

test('a hostile peer’s leaderboard (stamped 10³⁰⁰, or newer than the coordinator’s) is not the one shown: the join code’s peer’s board is, and without one a board from the future is left out', { timeout: 60_000 }, async (t) => {
  const [coordinatorNode, attacker, reader] = await startSwarm(t, 3, { runId: `${RUN}-board` });
  const now = Date.now();
  const row = (name: string) => ({ name, samples: 1000, share: 1, rank: 1 });
  await leaderboardRecords(coordinatorNode!).store(LEADERBOARD_NAMESPACE, '', { time: now, rows: [row('honest')], flagged: 0 }, now + 60_000);
  // within the schema (a finite time), signed by the attacker's own identity
  await leaderboardRecords(attacker!).store(LEADERBOARD_NAMESPACE, '', { time: 1e300, rows: [row('attacker')], flagged: 0 }, now + 60_000);
  const trusted = [coordinatorNode!.peerId.toString()];
  assert.deepEqual((await latestLeaderboard(reader!, trusted))?.rows.map((r) => r.name), ['honest']);
  assert.deepEqual((await latestLeaderboard(reader!))?.rows.map((r) => r.name), ['honest'], 'a board from the future is left out');
  // a board stamped after the coordinator's (the attacker republishing often) still gives way to the join code's peer's
  await leaderboardRecords(attacker!).store(LEADERBOARD_NAMESPACE, '', { time: now + 1, rows: [row('attacker')], flagged: 0 }, now + 60_001);
  assert.deepEqual((await latestLeaderboard(reader!, trusted))?.rows.map((r) => r.name), ['honest']);
  assert.deepEqual((await latestLeaderboard(reader!))?.rows.map((r) => r.name), ['attacker'], 'without a join code the newest board is shown');
});
