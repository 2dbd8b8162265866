// The coordinator's view of the swarm epoch, with a peer that publishes a bogus one: real swarm nodes
// on loopback, an honest peer serving its state, and the coordinator polled in-process.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { Coordinator } from '../../src/collab/coordinator.js';
import { loadFullState, SWARM_STATE_CHECKPOINT } from '../../src/collab/full-state.js';
import { newRunParams } from '../../src/collab/run-params.js';
import { DEFAULT_RUN_SETTINGS } from '../../src/collab/run-settings.js';
import { encodeTrainingState } from '../../src/collab/state.js';
import { PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { createOptimizer } from '../../src/engine/index.js';
import { STATE_PREFIX } from '../../src/collab/optimizer.js';
import { createAverager } from '../../src/averaging/index.js';
import { METRIC } from '../../src/store/metric-series.js';
import { openStore } from '../../src/store/index.js';
import { capturingLogger, warningLog } from '../helpers/log.js';
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

test('a state whose content claims epoch 10⁹, or an epoch older than the download\'s, is not checkpointed and does not put off the next checkpoint', { timeout: 60_000 }, async (t) => {
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
  const params = initAlbertParams(config, 1);
  const optimizer = createOptimizer(params, { kind: 'lamb', lr: 1e-3 }).exportState();
  let claimed = 1_000_000_000;
  const state = createAverager(donor!, { prefix: STATE_PREFIX });
  t.after(() => state.stop());
  // advertised and sent as epoch 2 (the swarm's), but the state inside says `claimed`
  const { advertise } = await state.serveState({ epoch: () => 2, snapshot: () => ({ epoch: 2, data: encodeTrainingState({ epoch: claimed, config, params, optimizer }) }) });
  await advertise();
  await publishProgress(donor!, { epoch: 2, samples: 8 });

  await coordinator.poll();
  assert.deepEqual(store.checkpoints.list(SWARM_STATE_CHECKPOINT), []);
  assert.ok(warnings.some((w) => w.includes('sent a state of epoch 1000000000, but the swarm is at epoch 2')), warnings.join('\n'));
  // a state older than the download's (and the swarm's) epoch is not recorded as the run's checkpoint either
  claimed = 1;
  await coordinator.poll();
  assert.deepEqual(store.checkpoints.list(SWARM_STATE_CHECKPOINT), []);
  assert.deepEqual(fs.existsSync(path.join(dataDir, 'checkpoints')) ? fs.readdirSync(path.join(dataDir, 'checkpoints')) : [], [], 'no model folder');
  assert.ok(warnings.some((w) => w.includes('sent a state of epoch 1 in a download of epoch 2, the swarm at epoch 2')), warnings.join('\n'));
  claimed = 2;
  await coordinator.poll();
  assert.deepEqual(store.checkpoints.list(SWARM_STATE_CHECKPOINT).map((c) => c.epoch), [2], 'the next look checkpoints the honest state');
});

test('the coordinator checkpoints the full state with the run record; restarted on its store, it serves the checkpoint until the swarm serves a state as new', { timeout: 90_000 }, async (t) => {
  const run = `${RUN}-restart`;
  const [coordinatorNode, donor, joiner] = await startSwarm(t, 3, { runId: run });
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  t.after(() => store.close());
  const { log } = warningLog();
  const record = newRunParams(DEFAULT_RUN_SETTINGS, null, 1_700_000_000_000);
  const config = PRESETS.tiny;
  const params = initAlbertParams(config, 2);
  const optimizer = createOptimizer(params, { kind: 'lamb', lr: 1e-3 });
  const grads = params.zerosLike();
  grads.data.fill(1e-3);
  optimizer.step(params, grads, 1e-3);
  const stateOf = (epoch: number) => encodeTrainingState({ epoch, config, params, optimizer: optimizer.exportState() });
  const bytes = stateOf(4);
  const served = createAverager(donor!, { prefix: STATE_PREFIX });
  const { advertise } = await served.serveState({ epoch: () => 4, snapshot: () => ({ epoch: 4, data: bytes }) });
  await advertise();
  await publishProgress(donor!, { epoch: 4, samples: 8 });

  const first = new Coordinator({ node: coordinatorNode!, store, dataDir, log, targetBatchSize: 80, refresh: 60, checkpointEvery: 2, run: record });
  await first.poll();
  await first.stop();
  const saved = loadFullState(store, SWARM_STATE_CHECKPOINT, { runId: run });
  assert.equal(saved?.state.epoch, 4);
  assert.deepEqual(saved.run, record);
  assert.equal(saved.state.optimizer?.step, 1);
  assert.deepEqual(saved.state.optimizer?.expAvg.data, optimizer.exportState().expAvg.data);
  // every peer leaves: nobody serves a state any more
  await served.stop();
  await new Promise((r) => setTimeout(r, 50));

  const restarted = new Coordinator({ node: coordinatorNode!, store, dataDir, log, targetBatchSize: 80, refresh: 60, checkpointEvery: 2, run: record });
  restarted.start();
  t.after(() => restarted.stop());
  const loader = createAverager(joiner!, { prefix: STATE_PREFIX });
  t.after(() => loader.stop());
  let loaded: Awaited<ReturnType<typeof loader.loadStateFromPeers>> | undefined;
  for (let i = 0; i < 100 && !loaded; i++) {
    loaded = await loader.loadStateFromPeers({ minEpoch: 4 }).catch(() => undefined);
    if (!loaded) await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(loaded?.donor, coordinatorNode!.peerId.toString(), 'the first joiner loads the checkpoint from the coordinator');
  assert.equal(loaded.epoch, 4);
  assert.deepEqual(Buffer.from(loaded.data), Buffer.from(saved.bytes));

  // the joiner trained on and serves a newer state: the coordinator stops serving its own at its next look
  const { advertise: joinerAdvertises } = await loader.serveState({ epoch: () => 6, snapshot: () => ({ epoch: 6, data: stateOf(6) }) });
  await joinerAdvertises();
  await restarted.poll();
  const observer = createAverager(donor!, { prefix: STATE_PREFIX });
  t.after(() => observer.stop());
  assert.equal(await observer.advertisedStateEpoch(), 6, 'the coordinator withdrew its advertisement of epoch 4 (else the joiner’s epoch 6 would be unbacked)');
});

test('restarted on a store whose newest checkpoint is damaged, the coordinator counts its next checkpoint from the newest that verifies', { timeout: 60_000 }, async (t) => {
  const run = `${RUN}-damaged`;
  const [coordinatorNode, donor] = await startSwarm(t, 2, { runId: run });
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  const config = PRESETS.tiny;
  const params = initAlbertParams(config, 3);
  const optimizer = createOptimizer(params, { kind: 'lamb', lr: 1e-3 }).exportState();
  const stateOf = (epoch: number) => encodeTrainingState({ epoch, config, params, optimizer });
  // what the coordinator saved before it stopped: epoch 2, then epoch 4, damaged since (a bad sector)
  store.checkpoints.save({ kind: SWARM_STATE_CHECKPOINT, epoch: 2, data: stateOf(2), meta: { runId: run } });
  const damaged = store.checkpoints.save({ kind: SWARM_STATE_CHECKPOINT, epoch: 4, data: stateOf(4), meta: { runId: run } });
  store.checkpoints.db.prepare('UPDATE checkpoint_chunks SET data = zeroblob(length(data)) WHERE checkpoint_id = ? AND seq = 0').run(damaged.id);
  const { warnings, log } = warningLog();
  const coordinator = new Coordinator({ node: coordinatorNode!, store, dataDir, log, targetBatchSize: 80, refresh: 60, checkpointEvery: 2 });
  t.after(async () => {
    await coordinator.stop();
    store.close();
  });
  // the swarm is at epoch 4: two epochs past the last usable checkpoint, so the coordinator takes one
  const served = createAverager(donor!, { prefix: STATE_PREFIX });
  t.after(() => served.stop());
  const { advertise } = await served.serveState({ epoch: () => 4, snapshot: () => ({ epoch: 4, data: stateOf(4) }) });
  await advertise();
  await publishProgress(donor!, { epoch: 4, samples: 8 });

  await coordinator.poll();
  assert.deepEqual(store.checkpoints.list(SWARM_STATE_CHECKPOINT).map((c) => c.epoch), [4, 4, 2], warnings.join('\n'));
  assert.equal(loadFullState(store, SWARM_STATE_CHECKPOINT, { runId: run })?.state.epoch, 4);
  assert.match(warnings.join('\n'), new RegExp(`skipping checkpoint ${damaged.id} \\(swarm-state, epoch 4\\): .*fails its checksum`));
});

test('restarted with another run record under the same run id, the coordinator passes over the checkpoint of the run founded before (warned) and does not serve it', { timeout: 60_000 }, async (t) => {
  const run = `${RUN}-refounded`;
  const [coordinatorNode] = await startSwarm(t, 1, { runId: run });
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  t.after(() => store.close());
  const config = PRESETS.tiny;
  const params = initAlbertParams(config, 4);
  const optimizer = createOptimizer(params, { kind: 'lamb', lr: 1e-3 }).exportState();
  const before = newRunParams(DEFAULT_RUN_SETTINGS, null, 1_700_000_000_000);
  const now = newRunParams({ ...DEFAULT_RUN_SETTINGS, targetBatchSize: DEFAULT_RUN_SETTINGS.targetBatchSize * 2 }, null, 1_800_000_000_000);
  const theirs = store.checkpoints.save({ kind: SWARM_STATE_CHECKPOINT, epoch: 6, data: encodeTrainingState({ epoch: 6, config, params, optimizer }), meta: { runId: run, run: before } });
  const { log, lines } = capturingLogger();
  const coordinator = new Coordinator({ node: coordinatorNode!, store, dataDir, log, targetBatchSize: now.targetBatchSize, refresh: 60, checkpointEvery: 2, run: now });
  coordinator.start();
  await coordinator.stop();
  const messages = lines.map((l) => (JSON.parse(l) as { msg: string }).msg);
  assert.ok(messages.includes(`checkpoint ${theirs.id} (swarm-state, epoch 6) belongs to another run "${run}" (founded 2023-11-14T22:13:20.000Z, this one 2027-01-15T08:00:00.000Z): not resuming from it`), messages.join('\n'));
  assert.ok(!messages.some((m) => m.startsWith('serving the checkpoint')), messages.join('\n'));
});
