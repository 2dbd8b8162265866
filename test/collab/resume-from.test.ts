// `cohort run --resume-from DIR`: a state directory (saveStateDir's, or a bare model directory) round
// trips; bad directories and bad uses exit 2 naming the flag; a founding peer starts at the
// directory's epoch with its weights and optimizer state, with a real `cohort run` process.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { loadStateDir, saveStateDir, STATE_INFO_FILE } from '../../src/collab/full-state.js';
import { checkConfig, createOptimizer, initAlbertParams, loadModel, PRESETS, saveModel } from '../../src/engine/index.js';
import { openStore } from '../../src/store/index.js';
import { preparedVocabSize } from '../../src/training/data.js';
import { runCli } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';
import { preparedDataDirs, spawnCli } from './processes.js';

function stateOf(vocabSize: number, epoch: number) {
  const config = checkConfig({ ...PRESETS.tiny, vocabSize });
  const params = initAlbertParams(config, 5);
  const optimizer = createOptimizer(params, { kind: 'lamb', lr: 1e-3 });
  const grads = params.zerosLike();
  grads.data.fill(1e-3);
  optimizer.step(params, grads, 1e-3);
  return { epoch, config, params, optimizer: optimizer.exportState() };
}

test('a state directory round trips; a bare model directory is epoch 0 without optimizer state; a bad info file is named', (t) => {
  const dir = path.join(tmpDir(t), 'state');
  const state = stateOf(64, 7);
  saveStateDir(dir, state);
  const loaded = loadStateDir(dir);
  assert.equal(loaded.epoch, 7);
  assert.deepEqual(loaded.params.data, state.params.data);
  assert.equal(loaded.optimizer?.step, 1);
  assert.deepEqual(loaded.optimizer?.expAvgSq.data, state.optimizer.expAvgSq.data);

  const bare = path.join(tmpDir(t), 'model');
  saveModel(bare, state.config, state.params);
  const fresh = loadStateDir(bare);
  assert.equal(fresh.epoch, 0);
  assert.equal(fresh.optimizer, undefined);

  fs.writeFileSync(path.join(dir, STATE_INFO_FILE), '{"epoch": -1}');
  assert.throws(() => loadStateDir(dir), (e: Error) => e.message.includes(STATE_INFO_FILE) && e.message.includes('epoch'));
});

test('--resume-from: a missing directory and a joiner’s use exit 2 naming the flag', async (t) => {
  const root = tmpDir(t);
  const missing = await runCli(['run', '--resume-from', path.join(root, 'nothing'), '--data-dir', path.join(root, 'd'), '--log-level', 'error']);
  assert.equal(missing.code, 2, missing.stderr);
  assert.match(missing.stderr, /--resume-from: model directory .*config\.json not found/);
  const joiner = await runCli(['run', '--resume-from', root, '--initial-peers', '/ip4/127.0.0.1/tcp/1/p2p/12D3KooWDyNcYJACHh5hTR1fjaCjh5Q9oK5Arn1MUddJo3aWqbu3', '--data-dir', path.join(root, 'd'), '--log-level', 'error']);
  assert.equal(joiner.code, 2, joiner.stderr);
  assert.match(joiner.stderr, /--resume-from: founds a run/);
});

test('a peer founding a run with --resume-from starts at the directory’s epoch; stopped by --max-epochs, it leaves that epoch’s full state in its data directory and its model in --out', { timeout: 240_000 }, async (t) => {
  const root = tmpDir(t);
  const [dataDir] = await preparedDataDirs(path.join(root, 'template'), ['peer']);
  const store = openStore(dataDir!);
  const vocabSize = preparedVocabSize(store, undefined);
  store.close();
  const dir = path.join(root, 'state');
  saveStateDir(dir, stateOf(vocabSize, 7));
  const peer = spawnCli(t, ['run', '--resume-from', dir, '--run-id', 'resume-from-test', '--data-dir', dataDir!, '--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info', '--target-batch-size', '8', '--batch-size', '8', '--seq-len', '32', '--threads', '1', '--max-epochs', '8', '--out', path.join(root, 'final')]);
  assert.equal(await peer.exited, 0, peer.stderr.slice(-3000));
  const stepped = [...peer.stderr.matchAll(/Step #(\d+), loss/g)].map((m) => Number(m[1]));
  assert.deepEqual(stepped, [8], 'one step, from the directory’s epoch 7 to 8');
  const summary = JSON.parse(peer.stdout.trim().split('\n').at(-1)!) as { epoch: number; steps: number };
  assert.equal(summary.epoch, 8);
  assert.match(peer.stderr, /stopping: the swarm reached epoch 8, --max-epochs 8\n/, 'the log says why it stopped');
  // the last epoch is kept whatever a coordinator checkpointed: the peer saved its state as it stopped
  assert.match(peer.stderr, /saved this peer's state of epoch 8 /);
  const exported = path.join(root, 'exported');
  const r = await runCli(['model', 'export', '--state', '--data-dir', dataDir!, '--out', exported, '--log-level', 'error']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(loadStateDir(exported).epoch, 8);
  assert.deepEqual(loadModel(path.join(root, 'final')).params.data, loadStateDir(exported).params.data, '--out holds the model of that epoch');
});
