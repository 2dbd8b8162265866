// `cohort status` on a run whose training peers are all gone and whose coordinator was restarted: the
// coordinator serves its last checkpoint (a joiner loads it and continues at its epoch), so the run is
// at that epoch, not at 0 as the missing progress records alone would say.
import assert from 'node:assert/strict';
import path from 'node:path';
import test from 'node:test';
import { SWARM_STATE_CHECKPOINT } from '../../src/collab/full-state.js';
import { encodeTrainingState } from '../../src/collab/state.js';
import { checkConfig, createOptimizer, initAlbertParams, PRESETS } from '../../src/engine/index.js';
import { openStore } from '../../src/store/index.js';
import { runCli } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';
import { spawnCli, waitFor } from './processes.js';

const RUN_ID = 'status-served';
const EPOCH = 12;

test('cohort status reports the epoch of the checkpoint a restarted coordinator serves while no peer trains', { timeout: 120_000 }, async (t) => {
  const dataDir = path.join(tmpDir(t), 'co');
  // what a coordinator keeps of a run that reached epoch 12 (its download of a peer's state)
  const store = openStore(dataDir);
  const config = checkConfig(PRESETS.tiny);
  const params = initAlbertParams(config, 3);
  store.checkpoints.save({ kind: SWARM_STATE_CHECKPOINT, epoch: EPOCH, meta: { runId: RUN_ID }, data: encodeTrainingState({ epoch: EPOCH, config, params, optimizer: createOptimizer(params, { kind: 'lamb', lr: 1e-3 }).exportState() }) });
  store.close();

  const co = spawnCli(t, ['run', '--coordinator', '--run-id', RUN_ID, '--data-dir', dataDir, '--checkpoint-every', '0', '--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info']);
  const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 60_000);
  await waitFor(co, new RegExp(`serving the checkpoint of epoch ${EPOCH} `), 30_000, 'stderr');

  const json = await runCli(['status', '--join', code!, '--json', '--log-level', 'error'], { timeoutMs: 60_000 });
  assert.equal(json.code, 0, json.stderr);
  const view = JSON.parse(json.stdout) as { epoch: number; servedStateEpoch: number | null; peers: number };
  assert.deepEqual([view.epoch, view.servedStateEpoch, view.peers], [EPOCH, EPOCH, 0], json.stdout);
  const text = await runCli(['status', '--join', code!, '--log-level', 'error'], { timeoutMs: 60_000 });
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, new RegExp(`^swarm "${RUN_ID}": epoch ${EPOCH}, 0 training peer\\(s\\), 0\\.0 samples/s\\nnewest state served: epoch ${EPOCH} \\(what a joining peer loads\\)\\n`));
  co.child.kill('SIGTERM');
  assert.equal(await co.exited, 0, co.stderr.slice(-2000));
});
