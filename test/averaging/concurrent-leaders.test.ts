import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { AveragingHub } from '../../src/averaging/hub.js';
import { leaderRank } from '../../src/averaging/matchmaking.js';
import { startSwarm } from '../helpers/swarm.js';
import { averagers, CROWDED, CROWDED_START_MS, maxAbsDiff, randomVector, weightedMean } from './helpers.js';

// Eight peers that begin matchmaking in the same instant each see a different subset of the others'
// declarations, so several of them lead at once (the swarm lab's and bench allreduce's "no group
// formed"): they must still end in ONE group of all eight, round after round. In the first round one
// peer's declaration takes 12 s to store, as a DHT store can on a loaded machine, so it joins before
// anyone can read it: members that refused a group listing a member whose declaration they could not
// read ("member … never declared") failed the round for all, and then met ALREADY_RUNNING everywhere.
test('8 peers that start matchmaking together form one group of 8, three rounds running, one with a slow declaration', async (t) => {
  const n = 8;
  const nodes = await startSwarm(t, n, { runId: 'mm-together' }, CROWDED_START_MS);
  // min = target = 8, as in bench allreduce: a split into two groups, or one member left out, fails the round
  const avg = averagers(t, nodes, () => ({ prefix: 'grad', ...CROWDED, targetGroupSize: n, minGroupSize: n }));
  const peers = nodes.map((node) => node.peerId.toString());
  // the peer that ranks last under round 0's key: a follower whatever the others see
  const slow = nodes[peers.map((p, i) => ({ i, rank: leaderRank('averaging/grad:0', p) })).sort((a, b) => (a.rank < b.rank ? 1 : -1))[0]!.i]!;
  const groups = AveragingHub.of(slow).groups;
  const store = groups.store.bind(groups);
  groups.store = async (...args) => {
    await delay(12_000);
    return store(...args);
  };
  for (let epoch = 0; epoch < 3; epoch++) {
    const vectors = avg.map((_, i) => randomVector(200, 10 * epoch + i + 1));
    const results = await Promise.all(avg.map((a, i) => a.step(vectors[i]!, { epoch, weight: 1 })));
    if (epoch === 0) groups.store = store;
    const failures = results.flatMap((r, i) => (r.ok ? [] : [`peer ${i}: ${r.reason}`]));
    assert.deepEqual(failures, [], `round ${epoch}: every peer averages`);
    const expected = weightedMean(vectors, vectors.map(() => 1));
    for (const r of results) {
      assert.ok(r.ok);
      assert.deepEqual(r.group.members.map((m) => m.peer).sort(), [...peers].sort(), `round ${epoch}: one group of all ${n}`);
      assert.equal(r.status, 'complete', `round ${epoch}: every part averaged`);
      assert.deepEqual(r.excluded, [], `round ${epoch}: no sender dropped`);
      assert.ok(maxAbsDiff(r.vector, expected) < 1e-5, `round ${epoch}: the average of all ${n}`);
    }
  }
});
