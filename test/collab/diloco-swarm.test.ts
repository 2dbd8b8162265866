// A DiLoCo run as real `cohort run` processes on loopback: a coordinator founds it with
// --outer-optimizer diloco --inner-steps 5, two peers adopt it and train (5 local LAMB steps, then one
// averaged outer step per epoch), loss falls; a newcomer joins mid-run, loads θ_start and the outer
// momentum, and averages its pseudo-gradient with them.
import assert from 'node:assert/strict';
import path from 'node:path';
import test from 'node:test';
import { tmpDir } from '../helpers/tmp.js';
import { preparedDataDirs, spawnCli, waitFor } from './processes.js';

/** A bound only: the peers are stopped (SIGTERM) once the newcomer has averaged with them. */
const MAX_EPOCHS = 60;
const H = 5;
// run-wide flags go to the coordinator: it founds the swarm and publishes them; the peers adopt them.
// The target batch is far beyond a round's samples: H decides when a round ends
const COMMON = ['--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info', '--refresh', '1'];
const RUN = ['--target-batch-size', '1000', '--lr', '0.01', '--warmup-steps', '1', '--total-steps', '1000', '--outer-optimizer', 'diloco', '--inner-steps', String(H), '--grad-compression', 'fp16'];
const TRAIN = [...COMMON, '--batch-size', '4', '--max-epochs', String(MAX_EPOCHS), '--matchmaking-time', '2', '--averaging-timeout', '20', '--threads', '1'];
const ROUND = /Averaged pseudo-gradients with (\d) peers \(([\d.]+) MB on the wire/;

interface Summary {
  epoch: number;
  losses: Array<{ epoch: number; loss: number }>;
  averaged: number;
}

test('a DiLoCo run: 2 peers adopt it from the founder and train, loss falls; a newcomer joins mid-run and averages with them', { timeout: 300_000 }, async (t) => {
  const root = tmpDir(t);
  const [a, b, c] = await preparedDataDirs(path.join(root, 'template'), ['a', 'b', 'c']);
  const co = spawnCli(t, ['run', '--coordinator', '--run-id', 'diloco-test', '--data-dir', path.join(root, 'coordinator'), ...COMMON, ...RUN]);
  const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 30_000);
  const peers = [spawnCli(t, ['run', '--join', code!, '--data-dir', a!, ...TRAIN]), spawnCli(t, ['run', '--join', code!, '--data-dir', b!, ...TRAIN])];
  // the newcomer starts once the first two have averaged: the swarm is mid-run, ahead of it
  await waitFor(peers[0]!, /Averaged pseudo-gradients with 2 peers/, 120_000, 'stderr');
  const newcomer = spawnCli(t, ['run', '--join', code!, '--data-dir', c!, ...TRAIN]);
  const all = [...peers, newcomer];
  // however long its start-up takes, the others train on until it has averaged with them; then all stop
  await waitFor(newcomer, /Averaged pseudo-gradients with 3 peers/, 150_000, 'stderr');
  for (const p of all) p.child.kill('SIGTERM');
  const codes = await Promise.all(all.map((p) => p.exited));
  co.child.kill('SIGTERM');
  const summaries = all.map((p, i) => {
    assert.equal(codes[i], 0, p.stderr.slice(-3000));
    return JSON.parse(p.stdout.trim().split('\n').at(-1)!) as Summary;
  });
  for (const [i, p] of all.entries()) {
    assert.match(p.stderr, new RegExp(`outer optimizer diloco, inner steps ${H}, outer lr 0\\.7, outer momentum 0\\.9`), `peer ${i} adopted the run's outer optimizer`);
    const rounds = [...p.stderr.matchAll(new RegExp(ROUND, 'g'))];
    assert.ok(rounds.length > 0, `peer ${i} never averaged a pseudo-gradient:\n${p.stderr.split('\n').filter((l) => /averag|group/i.test(l)).slice(-20).join('\n')}`);
    t.diagnostic(`peer ${i}: ${rounds.length} DiLoCo rounds; last: ${rounds.at(-1)![0]}`);
    assert.doesNotMatch(p.stderr, /Averaged gradients with/, `peer ${i} averaged gradients: no round but the outer one`);
    assert.ok(summaries[i]!.averaged > 0, `peer ${i} never averaged`);
  }
  assert.match(newcomer.stderr, /loaded state of epoch [1-9]\d* from /, 'the newcomer loaded the swarm’s θ_start, mid-run');
  const first = summaries.slice(0, 2).flatMap((s) => s.losses.slice(0, 2).map((l) => l.loss));
  const last = summaries.slice(0, 2).flatMap((s) => s.losses.slice(-2).map((l) => l.loss));
  const mean = (xs: number[]): number => xs.reduce((s, x) => s + x, 0) / xs.length;
  t.diagnostic(`loss ${mean(first).toFixed(4)} → ${mean(last).toFixed(4)}`);
  assert.ok(mean(last) < mean(first), `loss did not fall: ${mean(first)} → ${mean(last)}`);
  assert.equal(await co.exited, 0, co.stderr.slice(-3000));
});
