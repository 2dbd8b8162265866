// The coordinator's view of the swarm epoch, with a peer that publishes a bogus one: real swarm nodes
// on loopback, an honest peer serving its state, and the coordinator polled in-process.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Coordinator, SWARM_MODEL_CHECKPOINT } from '../../src/collab/coordinator.js';
import { encodeTrainingState } from '../../src/collab/state.js';
import { PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { STATE_PREFIX } from '../../src/collab/optimizer.js';
import { createAverager } from '../../src/averaging/index.js';
import { METRIC } from '../../src/store/metric-series.js';
import { openStore } from '../../src/store/index.js';
import { warningLog } from '../helpers/log.js';
import { publishProgress } from '../helpers/progress.js';
import { startSwarm } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

const RUN = 'coordinator-epochs';

test('a progress report no advertised state backs (epoch 1,000,000) does not become the swarm epoch the coordinator records, and is warned about once', { timeout: 60_000 }, async (t) => {
  const [coordinatorNode, honest, liar] = await startSwarm(t, 3, { runId: RUN });
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  const { warnings, log } = warningLog();
  const coordinator = new Coordinator({ node: coordinatorNode!, store, dataDir, log, targetBatchSize: 80, refresh: 60, checkpointEvery: 0 });
  t.after(async () => {
    await coordinator.stop();
    store.close();
  });
  // the honest peer stepped into epoch 3 and serves its state; the liar only claims an epoch
  const state = createAverager(honest!, { prefix: STATE_PREFIX });
  t.after(() => state.stop());
  const { advertise } = await state.serveState({ epoch: () => 3, snapshot: () => ({ epoch: 3, data: new Uint8Array(8) }) });
  await advertise();
  const time = Date.now();
  const measured = { time, samplesPerSecond: 4, totalSamples: 40, computeSeconds: 10 };
  await publishProgress(honest!, { ...measured, epoch: 3, samples: 8, lastStep: { epoch: 2, samples: 40, loss: 4.5, weights: { [honest!.peerId.toString()]: 40 } } });
  await publishProgress(liar!, { ...measured, epoch: 1_000_000, samples: 0 });

  await coordinator.poll();
  await coordinator.poll();
  assert.deepEqual(store.metrics.query(METRIC.epoch, { peer: '' }).map((p) => p.value), [3, 3]);
  assert.deepEqual(store.metrics.query(METRIC.loss, { peer: '' }).map((p) => [p.epoch, p.value]), [[3, 4.5]], 'the swarm loss of the step into epoch 3');
  const leftOut = warnings.filter((w) => w.includes('leaving their progress out'));
  assert.equal(leftOut.length, 1, warnings.join('\n'));
  assert.match(leftOut[0]!, new RegExp(`1 peer\\(s\\) report epochs up to 1000000 \\(${liar!.peerId.toString()}\\), but the newest state advertised is of epoch 3`));
});

test('a state whose content claims epoch 10⁹ is not checkpointed and does not put off the next checkpoint', { timeout: 60_000 }, async (t) => {
  const [coordinatorNode, donor] = await startSwarm(t, 2, { runId: `${RUN}-ckpt` });
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  const { warnings, log } = warningLog();
  const coordinator = new Coordinator({ node: coordinatorNode!, store, dataDir, log, targetBatchSize: 80, refresh: 60, checkpointEvery: 1 });
  t.after(async () => {
    await coordinator.stop();
    store.close();
  });
  const config = PRESETS.tiny;
  let claimed = 1_000_000_000;
  const state = createAverager(donor!, { prefix: STATE_PREFIX });
  t.after(() => state.stop());
  // advertised and sent as epoch 2 (the swarm's), but the state inside says `claimed`
  const { advertise } = await state.serveState({ epoch: () => 2, snapshot: () => ({ epoch: 2, data: encodeTrainingState({ epoch: claimed, config, params: initAlbertParams(config, 1) }) }) });
  await advertise();
  await publishProgress(donor!, { epoch: 2, samples: 8 });

  await coordinator.poll();
  assert.deepEqual(store.checkpoints.list(SWARM_MODEL_CHECKPOINT), []);
  assert.ok(warnings.some((w) => w.includes('sent a state of epoch 1000000000, but the swarm is at epoch 2')), warnings.join('\n'));
  claimed = 2;
  await coordinator.poll();
  assert.deepEqual(store.checkpoints.list(SWARM_MODEL_CHECKPOINT).map((c) => c.epoch), [2], 'the next look checkpoints the honest state');
});
