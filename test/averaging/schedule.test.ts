import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AveragingEvent } from '../../src/averaging/index.js';
import { startSwarm } from '../helpers/swarm.js';
import { averagers, FAST, maxAbsDiff, randomVector, weightedMean } from './helpers.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Pre-scheduled rounds (hivemind's schedule_step): matchmaking runs before the vectors and weights exist. */
function scheduledSwarm(t: import('node:test').TestContext, runId: string, n: number, readyTimeoutMs: number) {
  return (async () => {
    const nodes = await startSwarm(t, n, { runId });
    const events: AveragingEvent[][] = nodes.map(() => []);
    const avg = averagers(t, nodes, (i) => ({ prefix: 'grad', ...FAST, matchmakingTimeMs: 1500, averagingExpirationMs: 4000, readyTimeoutMs, targetGroupSize: n, minGroupSize: 2, onEvent: (e) => events[i]!.push(e) }));
    return { nodes, avg, events };
  })();
}

test('a pre-scheduled round: the group is found before the vectors exist, and the weights given at run time average exactly', async (t) => {
  const { nodes, avg, events } = await scheduledSwarm(t, 'sched-exact', 3, 10_000);
  const size = 1000;
  const rounds = avg.map((a) => a.schedule({ epoch: 4, size }));
  // the matchmaking time passes while the peers "compute": the group closes and waits for their weights
  await sleep(2500);
  const vectors = nodes.map((_, i) => randomVector(size, 10 + i));
  const weights = [3, 7, 11];
  const results = await Promise.all(
    rounds.map(async (round, i) => {
      if (i === 2) await sleep(700); // the slowest peer finishes its last micro-batch later
      return round.run(vectors[i]!, weights[i]!);
    }),
  );
  const expected = weightedMean(vectors, weights);
  const peers = nodes.map((n) => n.peerId.toString());
  for (const [i, r] of results.entries()) {
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.ok(maxAbsDiff(r.vector, expected) <= 1e-6, `peer ${i}: ${maxAbsDiff(r.vector, expected)}`);
    assert.deepEqual(Object.fromEntries(r.group.members.map((m) => [m.peer, m.weight])), Object.fromEntries(peers.map((p, k) => [p, weights[k]])));
    // one matchmaking per peer: the scheduled group was used, not a fresh one found after `run`
    assert.equal(events[i]!.filter((e) => e.type === 'matchmaking').length, 1, `peer ${i} looked for a group again`);
  }
});

test('a scheduled member that cancels, or never becomes ready, is left out; the others still average exactly', async (t) => {
  const { nodes, avg } = await scheduledSwarm(t, 'sched-drop', 4, 1500);
  const size = 300;
  const rounds = avg.map((a) => a.schedule({ epoch: 1, size }));
  rounds[3]!.cancel('this peer loaded a newer state'); // peer 3 gives up; peer 2 simply never runs
  await sleep(1000);
  const vectors = nodes.map((_, i) => randomVector(size, 40 + i));
  const results = await Promise.all([rounds[0]!.run(vectors[0]!, 2), rounds[1]!.run(vectors[1]!, 5)]);
  const expected = weightedMean([vectors[0]!, vectors[1]!], [2, 5]);
  const two = [nodes[0]!, nodes[1]!].map((n) => n.peerId.toString()).sort();
  for (const r of results) {
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.deepEqual(r.group.members.map((m) => m.peer).sort(), two);
    assert.ok(maxAbsDiff(r.vector, expected) <= 1e-6);
  }
  rounds[2]!.cancel('test over');
});

test('run checks what it is given: the scheduled size, a finite weight, and only once', async (t) => {
  const { avg } = await scheduledSwarm(t, 'sched-checks', 2, 1000);
  const round = avg[0]!.schedule({ epoch: 0, size: 10 });
  await assert.rejects(round.run(new Float32Array(11), 1), /vector of 11 values, the round was scheduled for 10/);
  await assert.rejects(round.run(new Float32Array(10), 1), /already ran/);
  await assert.rejects(avg[0]!.schedule({ epoch: 0, size: 10 }).run(new Float32Array(10), Number.NaN), /step weight NaN/);
  assert.throws(() => avg[0]!.schedule({ epoch: -1, size: 10 }), /epoch -1/);
});

test('expectedPeers: a leader closes its group once every expected peer joined, without waiting out a long matchmaking time', { timeout: 60_000 }, async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'sched-expected' });
  // two minutes of matchmaking: only the early close lets this test finish within its timeout
  const avg = averagers(t, nodes, () => ({ prefix: 'grad', ...FAST, matchmakingTimeMs: 120_000, averagingExpirationMs: 120_000, targetGroupSize: 8, minGroupSize: 2 }));
  const vectors = nodes.map((_, i) => randomVector(200, 70 + i));
  const results = await Promise.all(avg.map((a, i) => a.step(vectors[i]!, { epoch: 2, weight: i + 1, expectedPeers: 3 })));
  const expected = weightedMean(vectors, [1, 2, 3]);
  for (const r of results) {
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.equal(r.group.members.length, 3);
    assert.ok(maxAbsDiff(r.vector, expected) <= 1e-6);
  }
  assert.throws(() => avg[0]!.schedule({ epoch: 3, size: 10, expectedPeers: 0 }), /expectedPeers 0 must be an integer ≥ 1/);
});

test('a pre-scheduled leader reads expectedPeers again when it is ready: a peer its caller learned of meanwhile still joins', { timeout: 60_000 }, async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'sched-late-expected' });
  const avg = averagers(t, nodes, () => ({ prefix: 'grad', ...FAST, matchmakingTimeMs: 4000, averagingExpirationMs: 10_000, targetGroupSize: 8, minGroupSize: 2 }));
  // when peers 0 and 1 schedule, their view of the swarm (a refresh behind) shows only the two of them
  let expected = 2;
  const size = 100;
  const rounds = avg.slice(0, 2).map((a) => a.schedule({ epoch: 5, size, expectedPeers: () => expected }));
  await sleep(1500); // both are in one group by now, as many as were expected
  expected = 3; // peer 2's progress record arrived while they computed
  const vectors = nodes.map((_, i) => randomVector(size, 90 + i));
  const results = await Promise.all([...rounds.map((r, i) => r.run(vectors[i]!, i + 1)), sleep(800).then(() => avg[2]!.step(vectors[2]!, { epoch: 5, weight: 3, expectedPeers: 3 }))]);
  const mean = weightedMean(vectors, [1, 2, 3]);
  for (const [i, r] of results.entries()) {
    assert.ok(r.ok, `peer ${i}: ${r.ok ? '' : r.reason}`);
    assert.equal(r.group.members.length, 3, `peer ${i} averaged in a group of ${r.group.members.length}`);
    assert.ok(maxAbsDiff(r.vector, mean) <= 1e-6);
  }
});
