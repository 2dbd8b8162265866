// A swarm that gathered its target batch and is averaging: its peers report nothing meanwhile, so
// their last reports, extrapolated with their throughput, grew past the target ("accumulated 394 of
// 32 samples"). `cohort status` (the real CLI) and the coordinator's metric show what the peers
// reported, and status says the swarm is ready to step. Real swarm nodes on loopback.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Coordinator } from '../../src/collab/coordinator.js';
import { METRIC } from '../../src/store/metric-series.js';
import { openStore } from '../../src/store/index.js';
import { runCli } from '../helpers/cli.js';
import { warningLog } from '../helpers/log.js';
import { publishProgress } from '../helpers/progress.js';
import { startSwarm } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

const TARGET = 32;

test('a swarm whose peers reported the target batch a minute ago shows that batch, ready to step, not the extrapolation past it', { timeout: 120_000 }, async (t) => {
  const [coordinatorNode, a, b] = await startSwarm(t, 3, { runId: 'status-progress' });
  // two peers gathered 16 samples each at 10 samples/s and went into averaging a minute ago
  const time = Date.now() - 60_000;
  for (const peer of [a!, b!]) await publishProgress(peer, { epoch: 0, samples: 16, samplesPerSecond: 10, time });

  const json = await runCli(['status', '--join', coordinatorNode!.joinCode(), '--target-batch-size', String(TARGET), '--json', '--log-level', 'error', '--data-dir', tmpDir(t)], { timeoutMs: 60_000 });
  assert.equal(json.code, 0, json.stderr);
  const view = JSON.parse(json.stdout) as { peers: number; samplesAccumulated: number; readyToStep: boolean; eta: number | null };
  assert.deepEqual([view.peers, view.samplesAccumulated, view.readyToStep, view.eta], [2, TARGET, true, 0], json.stdout);
  const text = await runCli(['status', '--join', coordinatorNode!.joinCode(), '--target-batch-size', String(TARGET), '--log-level', 'error', '--data-dir', tmpDir(t)], { timeoutMs: 60_000 });
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, /\naccumulated 32 of 32 samples; ready to step to epoch 1 \(at the peers' samples\/s the target is reached: they average, then step\)\n/);

  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  const coordinator = new Coordinator({ node: coordinatorNode!, store, dataDir, log: warningLog().log, targetBatchSize: TARGET, refresh: 60, checkpointEvery: 0 });
  t.after(async () => {
    await coordinator.stop();
    store.close();
  });
  await coordinator.poll();
  assert.deepEqual(store.metrics.query(METRIC.samplesAccumulated, { peer: '' }).map((p) => p.value), [TARGET], 'the dashboard’s and /metrics’ figure');
});
