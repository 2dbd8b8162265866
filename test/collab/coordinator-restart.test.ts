// A coordinator restarted on the same data dir continues its contribution credits: real swarm nodes
// on loopback publish signed progress records; the coordinator polls them, stops, and a new one on
// the same store picks up where it stopped (no step credited twice, throughput baselines kept).
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { CREDITED_SERIES, Coordinator } from '../../src/collab/coordinator.js';
import { PROGRESS_KEY, progressRecords, type ProgressRecord } from '../../src/collab/records.js';
import { createLogger } from '../../src/log/logger.js';
import { METRIC } from '../../src/store/metric-series.js';
import { openStore, type Store } from '../../src/store/index.js';
import { createSwarmNode, type SwarmNode } from '../../src/swarm/index.js';
import { runCli } from '../helpers/cli.js';
import { startNode, waitFor } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

const log = createLogger({ logLevel: (process.env.TEST_LOG as 'info' | undefined) ?? 'silent', logFormat: 'json' });
const RUN = 'coordinator-restart';
const REFRESH = 0.05;

/** A coordinator on its own node and store; `close` stops all three (also after the test, should an assertion fail first). */
async function coordinatorOn(t: TestContext, dataDir: string, initialPeers: string[]): Promise<{ store: Store; node: SwarmNode; coordinator: Coordinator; close: () => Promise<void> }> {
  const store = openStore(dataDir);
  const node = await createSwarmNode({ runId: RUN, listen: ['/ip4/127.0.0.1/tcp/0'], initialQuerySelfIntervalMs: 50, initialPeers }, store);
  const coordinator = new Coordinator({ node, store, dataDir, log, targetBatchSize: 80, refresh: REFRESH, checkpointEvery: 0 });
  let closed: Promise<void> | undefined;
  const close = () =>
    (closed ??= (async () => {
      await coordinator.stop();
      await node.stop();
      store.close();
    })());
  t.after(close);
  return { store, node, coordinator, close };
}

/** Two looks, the second after the crediting delay, so every step seen in the first is credited. */
async function look(coordinator: Coordinator): Promise<void> {
  await coordinator.poll();
  await new Promise((r) => setTimeout(r, REFRESH * 1000 + 20));
  await coordinator.poll();
}

test('a restarted coordinator continues every peer’s credits, compute and flags without crediting a step twice', { timeout: 60_000 }, async (t) => {
  const dataDir = tmpDir(t);
  const honest = await startNode(t, { runId: RUN });
  const liar = await startNode(t, { runId: RUN, initialPeers: honest.multiaddrs() });
  const [h, l] = [honest.peerId.toString(), liar.peerId.toString()];
  const T0 = Date.now() - 120_000;
  let expiry = Date.now() + 60_000;
  // the liar claims 10× what it computes but sends its true weight into the all-reduce (as the honest peer sees it)
  const publish = async (node: SwarmNode, r: Omit<ProgressRecord, 'clientMode' | 'samplesPerSecond'>, inflate = 1): Promise<void> => {
    const record: ProgressRecord = {
      ...r,
      samples: r.samples * inflate,
      totalSamples: r.totalSamples * inflate,
      samplesPerSecond: 4 * inflate,
      clientMode: false,
      ...(r.lastStep ? { lastStep: { ...r.lastStep, samples: r.lastStep.samples * inflate } } : {}),
    };
    const stored = await progressRecords(node).store(PROGRESS_KEY, '', record, ++expiry);
    assert.ok(stored.replicas > 0, `progress of ${node.peerId.toString()} was stored nowhere`);
  };
  const both = async (r: Omit<ProgressRecord, 'clientMode' | 'samplesPerSecond' | 'displayName'>): Promise<void> => {
    await publish(honest, { ...r, displayName: 'ada' });
    await publish(liar, { ...r, displayName: 'liar' }, 10);
  };
  const weights = { [h]: 40, [l]: 40 };

  let co = await coordinatorOn(t, dataDir, honest.multiaddrs());
  const coordinatorId = co.node.peerId.toString();
  await waitFor('the coordinator to know both peers', () => co.node.stats().routingTableSize >= 2);
  // epoch 0, mid-way (first sight), then both report the step that finished epoch 0: 40 samples in 10 s
  await both({ epoch: 0, samples: 8, time: T0, totalSamples: 8, computeSeconds: 2 });
  await co.coordinator.poll();
  await both({ epoch: 1, samples: 0, time: T0 + 10_000, totalSamples: 40, computeSeconds: 10, lastStep: { epoch: 0, samples: 40, loss: 5, weights } });
  await look(co.coordinator);
  const before = co.coordinator.leaderboard();
  assert.deepEqual(before.map((r) => [r.name, r.samples]), [['ada', 40], ['liar', 40]]);
  assert.equal(before.find((r) => r.name === 'ada')!.computeHours, 8 / 3600);
  assert.deepEqual(co.coordinator.flagged().map((f) => [f.peerId, f.epoch, f.claimed, f.credited]), [[l, 0, 400, 40]]);
  await co.close();

  co = await coordinatorOn(t, dataDir, honest.multiaddrs());
  assert.equal(co.node.peerId.toString(), coordinatorId, 'the restarted coordinator keeps its identity');
  await waitFor('the restarted coordinator to know both peers', () => co.node.stats().routingTableSize >= 2);
  // the records still announce the step of epoch 0: already credited, so nothing changes
  await look(co.coordinator);
  assert.deepEqual(co.coordinator.leaderboard(), before);
  // mid-epoch report, then the step of epoch 1: measured from the baseline stored before the restart
  await both({ epoch: 1, samples: 20, time: T0 + 15_000, totalSamples: 60, computeSeconds: 14, lastStep: { epoch: 0, samples: 40, loss: 5, weights } });
  await co.coordinator.poll();
  await both({ epoch: 2, samples: 0, time: T0 + 20_000, totalSamples: 80, computeSeconds: 18, lastStep: { epoch: 1, samples: 40, loss: 4, weights } });
  await look(co.coordinator);
  const after = co.coordinator.leaderboard();
  assert.deepEqual(after.map((r) => [r.name, r.samples]), [['ada', 80], ['liar', 80]]);
  // compute of epoch 1 counted from the stored baseline (10 s → 18 s), not from the first report seen after the restart (14 s)
  assert.equal(after.find((r) => r.name === 'ada')!.computeHours, 16 / 3600);
  assert.deepEqual(co.coordinator.flagged().map((f) => [f.peerId, f.epoch]), [[l, 0], [l, 1]]);
  const credited = co.store.metrics.query(CREDITED_SERIES, { peer: h }).map((p) => [p.epoch, p.value]);
  assert.deepEqual(credited, [[1, 40], [2, 80]]);
  // the swarm loss of each step recorded once across both runs
  assert.deepEqual(co.store.metrics.query(METRIC.loss, { peer: '' }).map((p) => p.epoch), [1, 2]);
  await co.close();

  // what the two runs credited, as `cohort metrics export` reads it from the coordinator's data dir
  const exported = await runCli(['metrics', 'export', '--table', 'contributions', '--format', 'json', '--data-dir', dataDir, '--log-level', 'error']);
  assert.equal(exported.code, 0, exported.stderr);
  const rows = JSON.parse(exported.stdout) as Array<{ run: string; peer: string; display_name: string; credited_samples: number; claimed_samples: number; steps: number; flagged_steps: number; share: number }>;
  assert.ok(rows.every((r) => r.run === RUN));
  assert.deepEqual(rows.map((r) => [r.peer, r.display_name, r.credited_samples, r.claimed_samples, r.steps, r.flagged_steps, r.share]), [
    [h, 'ada', 80, 80, 2, 0, 0.5],
    [l, 'liar', 80, 800, 2, 2, 0.5],
  ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))));
});
