// A DiLoCo run as real `cohort run` processes on loopback: a coordinator founds it with
// --outer-optimizer diloco --inner-steps 5 --inner-batch-size 8 --grad-compression blockwise8, two
// peers adopt it and train (5 local LAMB steps of two 4-sample micro-batches each, then one outer step
// on the pseudo-gradients averaged in 8 bits per epoch), loss falls; a newcomer joins mid-run, loads
// θ_start and the outer momentum, and averages its pseudo-gradient with them.
import assert from 'node:assert/strict';
import test from 'node:test';
import { runWithNewcomer } from './processes.js';

const H = 5;
// the target batch is far beyond a round's samples: H decides when a round ends
const RUN = ['--target-batch-size', '1000', '--lr', '0.01', '--warmup-steps', '1', '--total-steps', '1000', '--outer-optimizer', 'diloco', '--inner-steps', String(H), '--inner-batch-size', '8', '--grad-compression', 'blockwise8'];
const ROUND = (peers: number | string): RegExp => new RegExp(`Averaged pseudo-gradients with (${peers}) peers \\(([\\d.]+) MB on the wire`);

test('a DiLoCo run: 2 peers adopt it from the founder and train, loss falls; a newcomer joins mid-run and averages with them', { timeout: 300_000 }, async (t) => {
  const peers = await runWithNewcomer(t, 'diloco-test', RUN, ROUND);
  for (const [i, { proc }] of peers.entries()) {
    assert.match(proc.stderr, new RegExp(`outer optimizer diloco, inner steps ${H}, inner batch size 8, outer lr 0\\.7, outer momentum 0\\.9`), `peer ${i} adopted the run's outer optimizer`);
    assert.match(proc.stderr, /adopting the swarm's run parameters [^\n]*grad compression blockwise8/, `peer ${i} adopted the 8-bit wire format`);
    const rounds = [...proc.stderr.matchAll(new RegExp(ROUND('\\d'), 'g'))];
    assert.ok(rounds.length > 0, `peer ${i} never averaged a pseudo-gradient:\n${proc.stderr.split('\n').filter((l) => /averag|group/i.test(l)).slice(-20).join('\n')}`);
    t.diagnostic(`peer ${i}: ${rounds.length} DiLoCo rounds; last: ${rounds.at(-1)![0]}`);
    assert.match(proc.stderr, /Averaged pseudo-gradients with \d peers \([\d.]+ MB on the wire, [\d.e+-]+ MB sent, DiLoCo outer step, \d+ ms/, `peer ${i}: the round's line names DiLoCo`);
    assert.doesNotMatch(proc.stderr, /Averaged gradients with/, `peer ${i} averaged gradients: no round but the outer one`);
  }
});
