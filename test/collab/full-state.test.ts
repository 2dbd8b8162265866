// Full-state checkpoints through the worker thread: what is saved (parameters, LAMB moments and step,
// epoch, loss scaler, run record) is what loads, the snapshot is the values at the save's start, and
// a checkpoint of another run is never resumed from.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test, type TestContext } from 'node:test';
import type { Worker } from 'node:worker_threads';
import { FullStateSaver, loadFullState, PEER_STATE_CHECKPOINT, storedRunRecord, SWARM_STATE_CHECKPOINT } from '../../src/collab/full-state.js';
import { newRunParams } from '../../src/collab/run-params.js';
import { DEFAULT_RUN_SETTINGS } from '../../src/collab/run-settings.js';
import { encode as cborEncode } from 'cborg';
import { decodeTrainingState, encodeTrainingState, encodeTrainingStatePieces } from '../../src/collab/state.js';
import { checkConfig, configToHf, createOptimizer, DynamicLossScaler, encodeOptimizerState, encodeParams, initAlbertParams, PRESETS } from '../../src/engine/index.js';
import { createLogger } from '../../src/log/logger.js';
import { openStore, type Store } from '../../src/store/index.js';
import { tmpDir } from '../helpers/tmp.js';

const log = createLogger({ logLevel: 'silent', logFormat: 'json' });
const config = checkConfig({ ...PRESETS.tiny, vocabSize: 64 });

/** A new store and a checkpoint saver on it, both closed after the test. */
function storeAndSaver(t: TestContext): { store: Store; saver: FullStateSaver } {
  const store = openStore(tmpDir(t));
  const saver = new FullStateSaver(store, log);
  t.after(async () => {
    await saver.close();
    store.close();
  });
  return { store, saver };
}

function trained(seed: number) {
  const params = initAlbertParams(config, seed);
  const optimizer = createOptimizer(params, { kind: 'lamb', lr: 1e-3 });
  const grads = params.zerosLike();
  for (let step = 0; step < 2; step++) {
    grads.data.forEach((_, i) => (grads.data[i] = Math.sin(i * (step + 1)) * 1e-2));
    optimizer.step(params, grads, 1e-3);
  }
  const scaler = new DynamicLossScaler();
  scaler.update(false); // one overflow: scale backed off, one skipped step
  return { params, optimizer, scaler };
}

test('a training state encoded as pieces is cborg’s encoding of the whole map, byte for byte, with the values as views (not copies)', () => {
  const { params, optimizer } = trained(1);
  const state = optimizer.exportState();
  for (const s of [{ epoch: 3, config, params, optimizer: state }, { epoch: 0, config, params }]) {
    const whole = cborEncode({ v: 1, epoch: s.epoch, config: configToHf(config), params: encodeParams(params), ...('optimizer' in s ? { optimizer: encodeOptimizerState(state) } : {}) });
    const pieces = encodeTrainingStatePieces(s);
    assert.deepEqual(Buffer.concat(pieces), Buffer.from(whole));
    assert.deepEqual(Buffer.from(encodeTrainingState(s)), Buffer.from(whole));
    assert.ok(pieces.some((p) => p.buffer === params.data.buffer), 'the parameters are not copied');
    assert.equal(decodeTrainingState(Buffer.concat(pieces), 'the pieces').epoch, s.epoch);
  }
});

test('a full-state checkpoint saved off the event loop loads back exactly, with the run record; another run’s is not resumed', { timeout: 60_000 }, async (t) => {
  const { store, saver } = storeAndSaver(t);
  const run = newRunParams(DEFAULT_RUN_SETTINGS, null, 1_700_000_000_000);
  const live = trained(1);
  const expected = { params: live.params.data.slice(), moments: live.optimizer.exportState(), scaler: live.scaler.exportState() };
  const save = saver.save(PEER_STATE_CHECKPOINT, { epoch: 7, config, ...live }, { runId: 'run-a', run }, 2);
  assert.ok(save);
  assert.equal(saver.save(PEER_STATE_CHECKPOINT, { epoch: 7, config, ...live }, { runId: 'run-a', run }, 2), undefined, 'one save at a time');
  await save.snapshotted;
  // changed once the snapshot is taken: the checkpoint keeps the values of the save's start
  live.params.data.fill(0.5);
  const info = await save.written;
  assert.equal(info.epoch, 7);

  const loaded = loadFullState(store, PEER_STATE_CHECKPOINT, { runId: 'run-a' });
  assert.ok(loaded);
  assert.equal(loaded.info.id, info.id);
  assert.equal(loaded.state.epoch, 7);
  assert.deepEqual(loaded.state.config, config);
  assert.deepEqual(loaded.state.params.data, expected.params);
  assert.equal(loaded.state.optimizer?.step, 2);
  assert.deepEqual(loaded.state.optimizer?.expAvg.data, expected.moments.expAvg.data);
  assert.deepEqual(loaded.state.optimizer?.expAvgSq.data, expected.moments.expAvgSq.data);
  assert.deepEqual(loaded.state.optimizer?.lossScaler, expected.scaler);
  assert.deepEqual(loaded.run, run);
  assert.deepEqual(storedRunRecord(store, 'run-a'), run);
  assert.equal(loadFullState(store, PEER_STATE_CHECKPOINT, { runId: 'run-b' }), undefined, 'a checkpoint of another run');
  assert.equal(storedRunRecord(store, 'run-b'), undefined);

  // already encoded bytes (a coordinator's download), pruned to the newest `keep`
  const other = trained(2);
  for (const epoch of [8, 9]) {
    const bytes = encodeTrainingState({ epoch, config, params: other.params, optimizer: other.optimizer.exportState() });
    await saver.saveBytes(SWARM_STATE_CHECKPOINT, epoch, bytes, { runId: 'run-a', donor: 'peer-x' }, 1);
  }
  assert.deepEqual(store.checkpoints.list(SWARM_STATE_CHECKPOINT).map((c) => [c.epoch, c.meta['donor']]), [[9, 'peer-x']]);
  const swarm = loadFullState(store, SWARM_STATE_CHECKPOINT);
  assert.equal(swarm?.state.epoch, 9);
  assert.deepEqual(swarm.state.params.data, other.params.data);
  assert.equal(swarm.run, undefined);
});

test('a damaged newest checkpoint is skipped with its reason; the previous one loads', { timeout: 60_000 }, async (t) => {
  const { store, saver } = storeAndSaver(t);
  const live = trained(3);
  for (const epoch of [1, 2]) await saver.save(PEER_STATE_CHECKPOINT, { epoch, config, ...live }, { runId: 'r' }, 3)!.written;
  const newest = store.checkpoints.list(PEER_STATE_CHECKPOINT)[0]!;
  store.checkpoints.db.prepare('UPDATE checkpoint_chunks SET data = zeroblob(length(data)) WHERE checkpoint_id = ? AND seq = 0').run(newest.id);
  const skipped: string[] = [];
  const loaded = loadFullState(store, PEER_STATE_CHECKPOINT, { runId: 'r', onSkip: (m) => skipped.push(m) });
  assert.equal(loaded?.state.epoch, 1);
  assert.equal(skipped.length, 1);
  assert.match(skipped[0]!, /checksum/);
});

test('resume skips, newest first, a checkpoint without a valid run id and one without optimizer state, each with its reason, and passes another run\'s over silently', (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  const { params, optimizer } = trained(4);
  const full = (epoch: number): Uint8Array => encodeTrainingState({ epoch, config, params, optimizer: optimizer.exportState() });
  const save = (epoch: number, data: Uint8Array, meta: Record<string, unknown>) => store.checkpoints.save({ kind: PEER_STATE_CHECKPOINT, epoch, data, meta });
  const good = save(1, full(1), { runId: 'r' });
  const noOptimizer = save(2, encodeTrainingState({ epoch: 2, config, params }), { runId: 'r' });
  save(3, full(3), { runId: 'another run' });
  const noRunId = save(4, full(4), { donor: 'peer-x' });
  const skipped: string[] = [];
  const loaded = loadFullState(store, PEER_STATE_CHECKPOINT, { runId: 'r', onSkip: (m) => skipped.push(m) });
  assert.equal(loaded?.info.id, good.id);
  assert.equal(loaded.state.epoch, 1);
  assert.equal(loaded.runId, 'r');
  assert.equal(skipped.length, 2, skipped.join('\n'));
  assert.match(skipped[0]!, new RegExp(`^checkpoint ${noRunId.id} \\(state, epoch 4\\) has no valid run id or run record: .*runId`, 's'));
  assert.equal(skipped[1], `skipping checkpoint ${noOptimizer.id} (state, epoch 2): checkpoint ${noOptimizer.id} in ${store.checkpoints.file} holds no optimizer state`);
});

test('given the run record, resume passes over a newer checkpoint of a run founded before under the same id (with its reason) and loads this run\'s older one', (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  const { params, optimizer } = trained(5);
  const full = (epoch: number): Uint8Array => encodeTrainingState({ epoch, config, params, optimizer: optimizer.exportState() });
  const earlier = newRunParams(DEFAULT_RUN_SETTINGS, null, 1_700_000_000_000);
  const current = newRunParams(DEFAULT_RUN_SETTINGS, null, 1_800_000_000_000);
  const mine = store.checkpoints.save({ kind: SWARM_STATE_CHECKPOINT, epoch: 2, data: full(2), meta: { runId: 'r', run: current } });
  const theirs = store.checkpoints.save({ kind: SWARM_STATE_CHECKPOINT, epoch: 9, data: full(9), meta: { runId: 'r', run: earlier } });
  const skipped: string[] = [];
  const loaded = loadFullState(store, SWARM_STATE_CHECKPOINT, { runId: 'r', run: current, onSkip: (m) => skipped.push(m) });
  assert.equal(loaded?.info.id, mine.id);
  assert.equal(loaded.state.epoch, 2);
  assert.deepEqual(skipped, [`checkpoint ${theirs.id} (swarm-state, epoch 9) belongs to another run "r" (founded 2023-11-14T22:13:20.000Z, this one 2027-01-15T08:00:00.000Z): not resuming from it`]);
  assert.equal(loadFullState(store, SWARM_STATE_CHECKPOINT, { runId: 'r', run: newRunParams(DEFAULT_RUN_SETTINGS, null, 1_900_000_000_000) }), undefined, 'no checkpoint of that run');
});

test('the checkpoint worker ends once idle (its memory is not kept between saves) and the next save starts another', { timeout: 60_000 }, async (t) => {
  const store = openStore(tmpDir(t));
  const saver = new FullStateSaver(store, log, { workerIdleMs: 200 });
  const exits: Promise<unknown>[] = [];
  const onWorker = (worker: Worker): void => void exits.push(once(worker, 'exit'));
  process.on('worker', onWorker);
  t.after(async () => {
    process.off('worker', onWorker);
    await saver.close();
    store.close();
  });
  const live = trained(4);
  for (const epoch of [1, 2]) {
    await saver.save(PEER_STATE_CHECKPOINT, { epoch, config, ...live }, { runId: 'r' }, 2)!.written;
    assert.equal(exits.length, epoch, `save ${epoch} runs on a worker of its own`);
    // bounded: without the idle end the worker lives until close()
    let timer: NodeJS.Timeout | undefined;
    const ended = await Promise.race([exits[epoch - 1]!.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(resolve, 20_000, false)))]);
    clearTimeout(timer);
    assert.ok(ended, `the worker of save ${epoch} ended once idle`);
  }
  assert.deepEqual(store.checkpoints.list(PEER_STATE_CHECKPOINT).map((c) => c.epoch), [2, 1]);
});

test('a checkpoint of another release’s state version is skipped naming both versions, kept in the store; the previous one loads', { timeout: 60_000 }, async (t) => {
  const { store, saver } = storeAndSaver(t);
  const live = trained(4);
  await saver.save(PEER_STATE_CHECKPOINT, { epoch: 1, config, ...live }, { runId: 'r' }, 3)!.written;
  // what a newer release (state version 2) left in this data directory before a downgrade
  const newer = store.checkpoints.save({ kind: PEER_STATE_CHECKPOINT, epoch: 2, data: Buffer.from(cborEncode({ v: 2, epoch: 2, config: configToHf(config), params: new Uint8Array(8) })), meta: { runId: 'r' } });
  const skipped: string[] = [];
  const loaded = loadFullState(store, PEER_STATE_CHECKPOINT, { runId: 'r', onSkip: (m) => skipped.push(m) });
  assert.equal(loaded?.state.epoch, 1);
  assert.equal(skipped.length, 1);
  assert.match(skipped[0]!, new RegExp(`skipping checkpoint ${newer.id} .*is of version 2, this Cohort reads version 1: another Cohort release wrote it`));
  assert.deepEqual(store.checkpoints.list(PEER_STATE_CHECKPOINT).map((c) => c.id)[0], newer.id, 'the newer checkpoint is kept');
});
