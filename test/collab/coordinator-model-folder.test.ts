// The coordinator's model folders (`<data dir>/checkpoints/epoch-NNNNNN/`) are written whole or not at
// all: real swarm nodes on loopback, a peer serving its state, the coordinator polled in-process.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { SWARM_STATE_CHECKPOINT } from '../../src/collab/full-state.js';
import { checkConfig, PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { loadModel, saveModel } from '../../src/engine/index.js';
import { openStore } from '../../src/store/index.js';
import { coordinatorWithDonorAtEpoch2 } from '../helpers/coordinator.js';
import { fill, smallDisk } from '../helpers/disk.js';
import { tmpDir } from '../helpers/tmp.js';

/** A coordinator checkpointing every epoch (keeping `keep`) and a donor serving the state of epoch 2. */
async function swarmAtEpoch2(t: TestContext, runId: string, dataDir: string, keep: number) {
  const store = openStore(dataDir);
  const { coordinator, warnings } = await coordinatorWithDonorAtEpoch2(t, { runId, dataDir, store, keepCheckpoints: keep });
  t.after(() => store.close());
  return { coordinator, store, warnings };
}

test('a model folder whose write fails midway (a full disk) is not left as the newest checkpoint; the next look writes it whole', { timeout: 120_000 }, async (t) => {
  const disk = smallDisk(t, 1);
  if (disk === undefined) return t.skip('needs root on Linux to mount a small tmpfs');
  const dataDir = tmpDir(t);
  // the model folders on the small disk, the store beside them
  const root = path.join(dataDir, 'checkpoints');
  fs.symlinkSync(disk, root);
  // room for config.json, not for the weights (≈ 200 KB)
  fill(path.join(disk, 'filler'), 64 * 1024);
  const { coordinator, store, warnings } = await swarmAtEpoch2(t, 'model-folder-full', dataDir, 3);

  await coordinator.poll();
  assert.deepEqual(store.checkpoints.list(SWARM_STATE_CHECKPOINT).map((c) => c.epoch), [2], warnings.join('\n'));
  assert.deepEqual(fs.readdirSync(root), ['filler'], 'no truncated epoch-000002, no half-written folder left');
  assert.match(warnings.join('\n'), /checkpoint at epoch 2 failed: could not write the model folder .*epoch-000002: ENOSPC/);

  fs.rmSync(path.join(disk, 'filler'));
  await coordinator.poll();
  assert.deepEqual(fs.readdirSync(root), ['epoch-000002']);
  assert.equal(loadModel(path.join(root, 'epoch-000002')).config.vocabSize, 64);
});

test('what a killed model-folder write left is deleted at the next checkpoint and never counted as one', { timeout: 120_000 }, async (t) => {
  const dataDir = tmpDir(t);
  const root = path.join(dataDir, 'checkpoints');
  // a complete folder of epoch 1 and a write of epoch 3 killed midway: only the complete one is a checkpoint
  fs.mkdirSync(path.join(root, 'epoch-000001'), { recursive: true });
  fs.mkdirSync(path.join(root, '.writing-epoch-000003'));
  fs.writeFileSync(path.join(root, '.writing-epoch-000003', 'config.json'), '{"trunc');
  const { coordinator, warnings } = await swarmAtEpoch2(t, 'model-folder-killed', dataDir, 2);

  await coordinator.poll();
  assert.deepEqual(fs.readdirSync(root).sort(), ['epoch-000001', 'epoch-000002'], warnings.join('\n'));
});

/** A whole model folder of the tiny model with `vocabSize` tokens (the donor's has 64). */
function modelFolder(dir: string, vocabSize: number): void {
  const config = checkConfig({ ...PRESETS.tiny, vocabSize });
  saveModel(dir, config, initAlbertParams(config, 1));
}

test('a coordinator killed while it replaced the model folder of an epoch (between the renames) finds that epoch whole when restarted, and replaces it again whole', { timeout: 120_000 }, async (t) => {
  const dataDir = tmpDir(t);
  const root = path.join(dataDir, 'checkpoints');
  // killed after setting epoch 2's folder aside, before the new one (still hidden, maybe half-written) was renamed in
  modelFolder(path.join(root, '.replaced-epoch-000002'), 32);
  fs.mkdirSync(path.join(root, '.writing-epoch-000002'));
  fs.writeFileSync(path.join(root, '.writing-epoch-000002', 'config.json'), '{"trunc');
  const { coordinator, warnings } = await swarmAtEpoch2(t, 'model-folder-replaced', dataDir, 3);
  // restarted: epoch 2 is back before its first checkpoint
  assert.deepEqual(fs.readdirSync(root), ['epoch-000002'], warnings.join('\n'));
  assert.equal(loadModel(path.join(root, 'epoch-000002')).config.vocabSize, 32);

  // the checkpoint of epoch 2 taken again replaces it, with nothing set aside left behind
  await coordinator.poll();
  assert.deepEqual(fs.readdirSync(root), ['epoch-000002'], warnings.join('\n'));
  assert.equal(loadModel(path.join(root, 'epoch-000002')).config.vocabSize, 64);
});

test('a coordinator killed after the new model folder of an epoch was renamed in keeps the new one and deletes the old when restarted', { timeout: 120_000 }, async (t) => {
  const dataDir = tmpDir(t);
  const root = path.join(dataDir, 'checkpoints');
  modelFolder(path.join(root, 'epoch-000002'), 48);
  modelFolder(path.join(root, '.replaced-epoch-000002'), 32);
  const { warnings } = await swarmAtEpoch2(t, 'model-folder-replaced-after', dataDir, 3);
  assert.deepEqual(fs.readdirSync(root), ['epoch-000002'], warnings.join('\n'));
  assert.equal(loadModel(path.join(root, 'epoch-000002')).config.vocabSize, 48);
});
