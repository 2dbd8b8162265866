// A forced non-finite step in a real `cohort run` process (the test hook --fault-non-finite-micro-batches):
// the engine's gradients of the first micro-batches hold a NaN; they are skipped, logged and counted in
// the store, and the peer trains on to its last epoch.
import assert from 'node:assert/strict';
import path from 'node:path';
import test from 'node:test';
import { runCli } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';
import { preparedDataDirs, spawnCli } from './processes.js';

test('cohort run: micro-batches with NaN gradients are skipped, logged and counted; training goes on to --max-epochs', { timeout: 240_000 }, async (t) => {
  const root = tmpDir(t);
  const [dir] = await preparedDataDirs(path.join(root, 'template'), ['peer']);
  const peer = spawnCli(t, [
    'run', '--run-id', 'bad-steps-cli', '--data-dir', dir!, '--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info',
    '--target-batch-size', '16', '--batch-size', '4', '--max-epochs', '2', '--matchmaking-time', '1', '--averaging-timeout', '5',
    '--threads', '1', '--lr', '0.01', '--warmup-steps', '1', '--total-steps', '1000', '--fault-non-finite-micro-batches', '3',
  ]);
  assert.equal(await peer.exited, 0, peer.stderr.slice(-3000));
  const summary = JSON.parse(peer.stdout.trim().split('\n').at(-1)!) as { epoch: number; badMicroBatches: number; losses: Array<{ epoch: number; loss: number }> };
  assert.equal(summary.badMicroBatches, 3);
  assert.equal(summary.epoch, 2);
  assert.deepEqual(summary.losses.map((l) => l.epoch), [1, 2]);
  assert.ok(summary.losses.every((l) => Number.isFinite(l.loss)), JSON.stringify(summary.losses));
  for (const n of [1, 2, 3]) assert.match(peer.stderr, new RegExp(`skipped a micro-batch at epoch 0: its gradient \\S+\\[0\\] is NaN \\(${n} in a row, ${n} in total\\)`));
  assert.doesNotMatch(peer.stderr, /leaves averaging/, 'three in a row are below --max-bad-micro-batches');
  const metrics = await runCli(['metrics', 'export', '--format', 'json', '--series', 'bad_micro_batches', '--data-dir', dir!, '--log-level', 'error']);
  assert.equal(metrics.code, 0, metrics.stderr);
  assert.deepEqual((JSON.parse(metrics.stdout) as Array<{ value: number }>).map((p) => p.value), [1, 2, 3]);
});
