// hivemind options end to end: 2 `cohort run` peers (and a coordinator to meet at) on loopback with
// use_local_updates, parameters averaged every 2 epochs over fp16, and a batch_size_lead.
import assert from 'node:assert/strict';
import path from 'node:path';
import test from 'node:test';
import { tmpDir } from '../helpers/tmp.js';
import { preparedDataDirs, spawnCli, waitFor } from './processes.js';

const EPOCHS = 6;
const COMMON = ['--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info', '--target-batch-size', '48', '--refresh', '1'];
const TRAIN = [
  ...COMMON,
  ...['--batch-size', '4', '--max-epochs', String(EPOCHS), '--matchmaking-time', '2', '--averaging-timeout', '20', '--threads', '1', '--lr', '0.05', '--warmup-steps', '1', '--total-steps', '1000'],
  ...['--use-local-updates', '--average-state-every', '2', '--state-averaging-compression', 'fp16', '--batch-size-lead', '8'],
];

interface Summary {
  epoch: number;
  losses: Array<{ epoch: number; loss: number }>;
  averaged: number;
  localFallbacks: number;
  stateAveraged: number;
}

test('use_local_updates with average_state_every 2 and batch_size_lead: epochs advance, parameters are averaged, loss falls', { timeout: 200_000 }, async (t) => {
  const root = tmpDir(t);
  const [a, b] = await preparedDataDirs(path.join(root, 'template'), ['a', 'b']);
  const co = spawnCli(t, ['run', '--coordinator', '--run-id', 'options-test', '--data-dir', path.join(root, 'co'), ...COMMON]);
  const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 30_000);
  const peers = [a!, b!].map((dir) => spawnCli(t, ['run', '--join', code!, '--data-dir', dir, ...TRAIN]));
  // bounded, with the peers' last words when they hang
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`peers still running after 150 s:\n${peers.map((p) => p.stderr.slice(-3000)).join('\n---\n')}`)), 150_000)));
  const codes = await Promise.race([Promise.all(peers.map((p) => p.exited)), hung]).finally(() => clearTimeout(timer));
  co.child.kill('SIGTERM');
  await co.exited;
  const summaries = peers.map((p, i) => {
    assert.equal(codes[i], 0, p.stderr.slice(-3000));
    return JSON.parse(p.stdout.trim().split('\n').at(-1)!) as Summary;
  });
  for (const [i, s] of summaries.entries()) {
    assert.ok(s.epoch >= EPOCHS, `peer ${i} stopped at epoch ${s.epoch}`);
    assert.equal(s.averaged, 0, 'gradients are never averaged with local updates');
    assert.equal(s.localFallbacks, 0);
    assert.ok(s.stateAveraged >= 1, `peer ${i} never averaged its parameters: ${peers[i]!.stderr.slice(-2000)}`);
    assert.match(peers[i]!.stderr, /Averaged parameters with 2 peers/);
  }
  const first = mean(summaries.map((s) => s.losses[0]!.loss));
  const last = mean(summaries.map((s) => s.losses.at(-1)!.loss));
  t.diagnostic(`loss ${first.toFixed(4)} → ${last.toFixed(4)}`);
  assert.ok(last < first, `loss did not fall: ${first} → ${last}`);
});

function mean(xs: number[]): number {
  return xs.reduce((s, x) => s + x, 0) / xs.length;
}
