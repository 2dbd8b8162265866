// A real training peer SIGKILLed in the middle of writing a full-state checkpoint (its second save,
// held open after its first commit of chunks by --fault-pause-state-save): the store passes integrity_check and
// keeps the previous checkpoint, and the peer restarted on its data directory continues from it.
import assert from 'node:assert/strict';
import path from 'node:path';
import test from 'node:test';
import { PEER_STATE_CHECKPOINT } from '../../src/collab/full-state.js';
import { openStore } from '../../src/store/index.js';
import { tmpDir } from '../helpers/tmp.js';
import { preparedDataDirs, spawnCli, waitFor } from './processes.js';

const RUN = ['run', '--run-id', 'checkpoint-kill-test', '--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info', '--target-batch-size', '8', '--batch-size', '8', '--seq-len', '32', '--threads', '1', '--save-state-every', '0'];

/** The store's checkpoints of this peer (kind `state` and the staging rows of unfinished saves), after an integrity check of both its files. */
function inspect(dir: string): { epochs: number[]; staged: number } {
  const store = openStore(dir);
  try {
    for (const db of [store.db, store.checkpoints.db]) assert.equal(db.pragma('integrity_check', { simple: true }), 'ok', db.name);
    const staged = store.checkpoints.db.prepare('SELECT count(*) FROM checkpoints WHERE kind = ?').pluck().get(`partial:${PEER_STATE_CHECKPOINT}`) as number;
    return { epochs: store.checkpoints.list(PEER_STATE_CHECKPOINT).map((c) => c.epoch), staged };
  } finally {
    store.close();
  }
}

test('a training peer killed while writing a checkpoint restarts from the previous one; the store passes integrity_check', { timeout: 120_000 }, async (t) => {
  const root = tmpDir(t);
  const [dir] = await preparedDataDirs(path.join(root, 'template'), ['peer']);
  const peer = spawnCli(t, [...RUN, '--data-dir', dir!, '--fault-pause-state-save', '2']);
  const [, saved] = await waitFor(peer, /saved this peer's state of epoch (\d+)/, 60_000, 'stderr');
  await waitFor(peer, /full-state save paused mid-write/, 30_000, 'stderr');
  peer.child.kill('SIGKILL');
  await peer.exited;
  const previous = Number(saved);

  const killed = inspect(dir!);
  assert.deepEqual(killed.epochs, [previous], 'the checkpoint being written is not listed; the previous one is');
  assert.equal(killed.staged, 1, 'the kill came in the middle of a save (its first chunks committed under the staging row, the save not completed)');

  const restarted = spawnCli(t, [...RUN, '--data-dir', dir!, '--max-epochs', String(previous + 1)]);
  assert.equal(await restarted.exited, 0, restarted.stderr.slice(-3000));
  assert.match(restarted.stderr, new RegExp(`resuming from this peer's checkpoint of epoch ${previous} `));
  const stepped = [...restarted.stderr.matchAll(/Step #(\d+), loss/g)].map((m) => Number(m[1]));
  assert.deepEqual(stepped, [previous + 1], 'training continues from the previous checkpoint’s epoch');
  assert.deepEqual(inspect(dir!), { epochs: [previous + 1, previous], staged: 0 }, 'the next save clears the staged chunks and completes');
});
