import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startSwarm } from '../helpers/swarm.js';
import { averagers, FAST, maxAbsDiff, randomVector, weightedMean } from './helpers.js';

test('3 peers with unequal weights and bandwidths average to the weighted mean', async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'avg-basic' });
  const bandwidths = [1e6, 3e6, 2e6];
  const avg = averagers(t, nodes, (i) => ({ prefix: 'grad', ...FAST, targetGroupSize: 3, chunkValues: 1000, bandwidthBytesPerS: bandwidths[i]! }));
  const n = 10_007;
  const vectors = [0, 1, 2].map((i) => randomVector(n, i + 1));
  const weights = [1, 5, 2];
  const results = await Promise.all(avg.map((a, i) => a.step(vectors[i]!, { epoch: 0, weight: weights[i]! })));
  const expected = weightedMean(vectors, weights);
  for (const r of results) {
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.equal(r.status, 'complete');
    assert.equal(r.group.members.length, 3);
    assert.ok(maxAbsDiff(r.vector, expected) <= 1e-6, `max abs err ${maxAbsDiff(r.vector, expected)}`);
  }
});
