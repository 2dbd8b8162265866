// hivemind options end to end: 2 `cohort run` peers (and a coordinator to meet at) on loopback, once
// with use_local_updates, parameters averaged every 2 epochs over fp16 and a batch_size_lead, once
// with delay_grad_averaging and delay_optimizer_step.
import assert from 'node:assert/strict';
import path from 'node:path';
import test, { type TestContext } from 'node:test';
import { tmpDir } from '../helpers/tmp.js';
import { preparedDataDirs, spawnCli, waitFor } from './processes.js';

const EPOCHS = 6;
const COMMON = ['--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info', '--target-batch-size', '48', '--refresh', '1'];
const TRAIN = [...COMMON, '--batch-size', '4', '--max-epochs', String(EPOCHS), '--matchmaking-time', '2', '--averaging-timeout', '20', '--threads', '1', '--lr', '0.05', '--warmup-steps', '1', '--total-steps', '1000'];

interface Summary {
  epoch: number;
  losses: Array<{ epoch: number; loss: number }>;
  averaged: number;
  localFallbacks: number;
  stateAveraged: number;
}

/** Runs a coordinator and 2 peers with `options` to the end; their summaries and stderr. */
async function swarmOf2(t: TestContext, runId: string, options: readonly string[]): Promise<Array<{ summary: Summary; stderr: string }>> {
  const root = tmpDir(t);
  const [a, b] = await preparedDataDirs(path.join(root, 'template'), ['a', 'b']);
  const co = spawnCli(t, ['run', '--coordinator', '--run-id', runId, '--data-dir', path.join(root, 'co'), ...COMMON]);
  const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 30_000);
  const peers = [a!, b!].map((dir) => spawnCli(t, ['run', '--join', code!, '--data-dir', dir, ...TRAIN, ...options]));
  // bounded, with the peers' last words when they hang
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`peers still running after 150 s:\n${peers.map((p) => p.stderr.slice(-3000)).join('\n---\n')}`)), 150_000)));
  const codes = await Promise.race([Promise.all(peers.map((p) => p.exited)), hung]).finally(() => clearTimeout(timer));
  co.child.kill('SIGTERM');
  await co.exited;
  return peers.map((p, i) => {
    assert.equal(codes[i], 0, p.stderr.slice(-3000));
    return { summary: JSON.parse(p.stdout.trim().split('\n').at(-1)!) as Summary, stderr: p.stderr };
  });
}

function assertLossFell(t: TestContext, runs: ReadonlyArray<{ summary: Summary }>): void {
  const first = mean(runs.map((r) => r.summary.losses[0]!.loss));
  const last = mean(runs.map((r) => r.summary.losses.at(-1)!.loss));
  t.diagnostic(`loss ${first.toFixed(4)} → ${last.toFixed(4)}`);
  assert.ok(last < first, `loss did not fall: ${first} → ${last}`);
}

test('use_local_updates with average_state_every 2 and batch_size_lead: epochs advance, parameters are averaged, loss falls', { timeout: 200_000 }, async (t) => {
  const runs = await swarmOf2(t, 'options-local', ['--use-local-updates', '--average-state-every', '2', '--state-averaging-compression', 'fp16', '--batch-size-lead', '8']);
  for (const [i, { summary: s, stderr }] of runs.entries()) {
    assert.ok(s.epoch >= EPOCHS, `peer ${i} stopped at epoch ${s.epoch}`);
    assert.equal(s.averaged, 0, 'gradients are never averaged with local updates');
    assert.equal(s.localFallbacks, 0);
    assert.ok(s.stateAveraged >= 1, `peer ${i} never averaged its parameters: ${stderr.slice(-2000)}`);
    assert.match(stderr, /Averaged parameters with 2 peers/);
  }
  assertLossFell(t, runs);
});

test('delay_grad_averaging + delay_optimizer_step: every epoch’s step lands (the last one before exit) during a later micro-batch, gradients are averaged, loss falls', { timeout: 200_000 }, async (t) => {
  const runs = await swarmOf2(t, 'options-delay', ['--delay-grad-averaging', '--delay-optimizer-step']);
  for (const [i, { summary: s, stderr }] of runs.entries()) {
    assert.ok(s.epoch >= EPOCHS, `peer ${i} stopped at epoch ${s.epoch}`);
    const epochs = s.losses.map((l) => l.epoch);
    assert.ok(epochs.every((e, k) => k === 0 || e > epochs[k - 1]!), `peer ${i}: steps out of order: ${epochs.join(', ')}`);
    assert.equal(epochs.at(-1), s.epoch, `peer ${i}: the last epoch's step was applied before exit`);
    assert.ok(s.averaged >= 1, `peer ${i} never averaged: ${stderr.slice(-2000)}`);
    assert.match(stderr, /Began averaging the gradients of epoch \d+ in the background/);
    assert.match(stderr, /Step #\d+, loss [\d.]+ \(update taken during the next micro-batch\)/);
  }
  assertLossFell(t, runs);
});

function mean(xs: number[]): number {
  return xs.reduce((s, x) => s + x, 0) / xs.length;
}
