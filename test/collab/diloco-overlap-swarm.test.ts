// A DiLoCo run with the one-step-delayed outer update as real `cohort run` processes on loopback: a
// coordinator founds it with --outer-optimizer diloco --outer-overlap --inner-steps 5, two peers adopt
// it and train, each round averaged in the background while the next round's inner steps run; loss
// falls, and a newcomer joins mid-run, loads θ_start and the outer momentum of a round that landed,
// and averages with them. The peers save their state (θ_start and the momentum) as they stop.
import assert from 'node:assert/strict';
import test from 'node:test';
import { runWithNewcomer } from './processes.js';

const H = 5;
// the target batch is far beyond a round's samples: H decides when a round ends
const RUN = ['--target-batch-size', '1000', '--lr', '0.01', '--warmup-steps', '1', '--total-steps', '1000', '--outer-optimizer', 'diloco', '--inner-steps', String(H), '--outer-overlap', '--grad-compression', 'fp16'];
const ROUND = (peers: number | string): RegExp => new RegExp(`Averaged pseudo-gradients with (${peers}) peers \\(([\\d.]+) MB on the wire`);

test('a DiLoCo run with --outer-overlap: rounds run in the background while the inner steps go on; loss falls; a newcomer joins mid-run and averages with them', { timeout: 300_000 }, async (t) => {
  const peers = await runWithNewcomer(t, 'diloco-overlap-test', RUN, ROUND);
  for (const [i, { proc }] of peers.entries()) {
    assert.match(proc.stderr, new RegExp(`outer momentum 0\\.9, outer overlap true`), `peer ${i} adopted the run's overlap`);
    const began = [...proc.stderr.matchAll(/Began averaging the pseudo-gradient of epoch (\d+) in the background; inner steps of epoch (\d+) meanwhile/g)];
    assert.ok(began.length > 0, `peer ${i} never averaged in the background`);
    for (const m of began) assert.equal(Number(m[2]), Number(m[1]) + 1, `peer ${i}: the next round's inner steps belong to the next epoch`);
    const rounds = [...proc.stderr.matchAll(new RegExp(ROUND('\\d'), 'g'))];
    t.diagnostic(`peer ${i}: ${began.length} rounds begun in the background, ${rounds.length} averaged`);
    assert.ok(rounds.length > 0, `peer ${i} never averaged a pseudo-gradient`);
    assert.match(proc.stderr, /saved this peer's state of epoch \d+/, `peer ${i} saved its state (θ_start and the outer momentum) as it stopped`);
  }
});
