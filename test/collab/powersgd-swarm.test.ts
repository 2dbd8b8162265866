// A PowerSGD run as real `cohort run` processes on loopback: a coordinator founds it with
// --grad-averager powersgd, two peers adopt it and train, loss falls; a newcomer joins mid-run, loads
// the model, and averages compressed gradients with them (its Q from the run's seed, its error buffer
// at zero).
import assert from 'node:assert/strict';
import test from 'node:test';
import { runWithNewcomer } from './processes.js';

const RUN = ['--target-batch-size', '32', '--lr', '0.05', '--warmup-steps', '1', '--total-steps', '1000', '--grad-averager', 'powersgd', '--powersgd-rank', '4'];
const ROUND = (peers: number | string): RegExp => new RegExp(`Averaged gradients with (${peers}) peers \\([\\d.]+ MB on the wire, ([\\d.]+) MB sent, PowerSGD rank 4, ([\\d.]+)× fewer values than plain averaging`);

test('a PowerSGD run: 2 peers adopt it from the founder and train, loss falls; a newcomer joins mid-run and averages with them', { timeout: 300_000 }, async (t) => {
  const peers = await runWithNewcomer(t, 'powersgd-test', RUN, ROUND);
  for (const [i, { proc }] of peers.entries()) {
    assert.match(proc.stderr, /grad averager powersgd, powersgd rank 4, powersgd min ratio 0\.5/, `peer ${i} adopted the run's averager`);
    const rounds = [...proc.stderr.matchAll(new RegExp(ROUND('\\d'), 'g'))];
    assert.ok(rounds.length > 0, `peer ${i} never averaged with PowerSGD:\n${proc.stderr.split('\n').filter((l) => /averag|group/i.test(l)).slice(-20).join('\n')}`);
    t.diagnostic(`peer ${i}: ${rounds.length} PowerSGD rounds; last: ${rounds.at(-1)![0]}`);
    for (const [, , , ratio] of rounds) assert.ok(Number(ratio) > 3, `peer ${i}: rank 4 sends ${ratio}× fewer values than plain averaging`);
  }
});
