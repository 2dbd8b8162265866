// A real training peer whose data directory's disk fills up while it trains and saves its state every
// epoch (a small tmpfs filled by a file): it stops with one line naming the directory and what to do,
// not SQLite's bare "database or disk is full" and a stack; its last checkpoint survives, and once
// space is freed it continues from it. Needs root on Linux (it mounts the tmpfs).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { PEER_STATE_CHECKPOINT } from '../../src/collab/full-state.js';
import { openStore } from '../../src/store/index.js';
import { fill, smallDisk } from '../helpers/disk.js';
import { tmpDir } from '../helpers/tmp.js';
import { preparedDataDirs, spawnCli, waitFor } from './processes.js';

const RUN = ['run', '--run-id', 'disk-full-test', '--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info', '--target-batch-size', '8', '--batch-size', '8', '--seq-len', '32', '--threads', '1', '--matchmaking-time', '1', '--save-state-every', '0'];

test('a training peer whose disk fills up stops with one line saying so; its last checkpoint survives and it continues from it once space is freed', { timeout: 180_000 }, async (t) => {
  const disk = smallDisk(t, 32);
  if (disk === undefined) return t.skip('needs root on Linux to mount a small tmpfs');
  const [template] = await preparedDataDirs(path.join(tmpDir(t), 'template'), ['peer']);
  const dir = path.join(disk, 'peer');
  fs.cpSync(template!, dir, { recursive: true });

  const peer = spawnCli(t, [...RUN, '--data-dir', dir]);
  await waitFor(peer, /saved this peer's state of epoch [2-9]/, 90_000, 'stderr');
  fill(path.join(disk, 'filler'));
  const code = await peer.exited;
  const saved = Math.max(...[...peer.stderr.matchAll(/saved this peer's state of epoch (\d+)/g)].map((m) => Number(m[1])));
  assert.equal(code, 1, peer.stderr.slice(-3000));
  const last = peer.stderr.trim().split('\n').at(-1)!;
  assert.match(last, new RegExp(`^cohort: the disk holding ${dir} is full \\(database or disk is full\\): free space there and run again; the checkpoints saved before are kept`));
  assert.doesNotMatch(peer.stderr, /\n\s+at /, 'no stack');

  fs.rmSync(path.join(disk, 'filler'));
  const store = openStore(dir);
  let kept: number;
  try {
    for (const db of [store.db, store.checkpoints.db]) assert.equal(db.pragma('integrity_check', { simple: true }), 'ok', db.name);
    kept = store.checkpoints.list(PEER_STATE_CHECKPOINT)[0]!.epoch;
  } finally {
    store.close();
  }
  assert.ok(kept >= saved, `the newest checkpoint is of epoch ${kept}; epoch ${saved} was saved before the disk filled`);
  const restarted = spawnCli(t, [...RUN, '--data-dir', dir, '--max-epochs', String(kept + 1)]);
  assert.equal(await restarted.exited, 0, restarted.stderr.slice(-3000));
  assert.match(restarted.stderr, new RegExp(`resuming from this peer's checkpoint of epoch ${kept} `));
});

test('a coordinator whose disk fills up says so once, naming the directory, goes on serving the swarm, and records again once space is freed', { timeout: 120_000 }, async (t) => {
  const disk = smallDisk(t, 16);
  if (disk === undefined) return t.skip('needs root on Linux to mount a small tmpfs');
  const dir = path.join(disk, 'coordinator');
  const co = spawnCli(t, ['run', '--coordinator', '--run-id', 'disk-full-co', '--data-dir', dir, '--checkpoint-every', '0', '--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'debug', '--refresh', '0.2']);
  // filled once the run record is kept in the store (before its first publication ends): a disk full before that stops the start, as it should
  await waitFor(co, /run parameters published/, 60_000, 'stderr');
  fill(path.join(disk, 'filler'));
  const full = new RegExp(`coordinator poll failed: the disk holding ${dir} is full \\(database or disk is full\\): free space there`, 'g');
  await waitFor(co, full, 60_000, 'stderr');
  fs.rmSync(path.join(disk, 'filler'));
  await waitFor(co, /coordinator polls again \(the last failure: the disk holding /, 60_000, 'stderr');
  assert.equal(co.stderr.match(full)!.length, 1, 'said once while the disk was full, not at every poll');
  assert.doesNotMatch(co.stderr, /coordinator poll failed: database or disk is full/);
  co.child.kill('SIGTERM');
  assert.equal(await co.exited, 0, co.stderr.slice(-2000));
});
