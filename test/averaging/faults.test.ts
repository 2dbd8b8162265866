import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Fault } from '../../src/averaging/index.js';
import type { SwarmNode } from '../../src/swarm/index.js';
import { startNode, startSwarm } from '../helpers/swarm.js';
import { averagers, FAST, maxAbsDiff, randomVector, weightedMean } from './helpers.js';

/** `servers` honest DHT servers plus client-mode peers with the given faults (they reduce nothing, so every part is reduced by an honest peer). */
async function swarm(t: import('node:test').TestContext, runId: string, servers: number, clients: number): Promise<SwarmNode[]> {
  const nodes = await startSwarm(t, servers, { runId });
  const extra = await Promise.all(Array.from({ length: clients }, () => startNode(t, { runId, clientMode: true, listen: [], initialPeers: nodes[0]!.multiaddrs() })));
  await Promise.all(extra.map((n) => n.ready));
  return [...nodes, ...extra];
}

test('peers sending NaN or a wrong-length part are excluded; the average stays finite and correct for the rest', async (t) => {
  const nodes = await swarm(t, 'avg-bad-data', 3, 2);
  const faults: Array<Fault | undefined> = [undefined, undefined, undefined, 'send-nan', 'send-wrong-length'];
  const avg = averagers(t, nodes, (i) => ({ prefix: 'grad', ...FAST, targetGroupSize: 5, chunkValues: 500, ...(faults[i] ? { fault: faults[i] } : {}) }));
  const n = 3001;
  const vectors = nodes.map((_, i) => randomVector(n, 40 + i));
  const weights = [2, 1, 3, 5, 5];
  const results = await Promise.all(avg.map((a, i) => a.step(vectors[i]!, { epoch: 0, weight: weights[i]! })));
  const honest = weightedMean(vectors.slice(0, 3), weights.slice(0, 3));
  const [nanPeer, shortPeer] = [nodes[3]!.peerId.toString(), nodes[4]!.peerId.toString()];
  for (const r of results.slice(0, 3)) {
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.equal(r.group.members.length, 5);
    assert.equal(r.status, 'complete');
    assert.ok(r.vector.every(Number.isFinite));
    assert.ok(maxAbsDiff(r.vector, honest) <= 1e-6, `max abs err ${maxAbsDiff(r.vector, honest)}`);
    const reasons = new Map(r.excluded.map((x) => [x.peer, x.reason]));
    assert.match(reasons.get(nanPeer) ?? '', /non-finite/);
    assert.match(reasons.get(shortPeer) ?? '', /must be \d+ bytes/);
  }
  // the faulty peers learn they were excluded: every part kept their local values, and the result says so
  for (const [k, r] of results.slice(3).entries()) {
    assert.ok(r.ok);
    assert.equal(r.status, 'partial');
    assert.equal(r.failedParts.length, 3);
    assert.ok(r.failedParts.every((p) => /EXCLUDED/.test(p.reason)), JSON.stringify(r.failedParts));
    assert.deepEqual(r.vector, vectors[3 + k]);
  }
});

test('a sender that stalls is dropped after the sender timeout; a reducer that stalls leaves its part local', async (t) => {
  const nodes = await swarm(t, 'avg-stall', 3, 1);
  const faults: Array<Fault | undefined> = [undefined, undefined, 'stall-reducing', 'stall-sending'];
  // the overall timeout stays far above the reducer timeout so that, however loaded the machine, the stalled
  // reducer is given up by its own timeout first (the order this test checks)
  const init = { ...FAST, senderTimeoutMs: 1000, reducerTimeoutMs: 2500, averagingTimeoutMs: 20_000 };
  const avg = averagers(t, nodes, (i) => ({ prefix: 'grad', ...init, targetGroupSize: 4, chunkValues: 400, ...(faults[i] ? { fault: faults[i] } : {}) }));
  const n = 2400;
  const vectors = nodes.map((_, i) => randomVector(n, 70 + i));
  const weights = [1, 2, 3, 4];
  const started = Date.now();
  const results = await Promise.all(avg.map((a, i) => a.step(vectors[i]!, { epoch: 0, weight: weights[i]! })));
  assert.ok(Date.now() - started < init.matchmakingTimeMs! + init.averagingTimeoutMs, 'no step outlives matchmaking + the all-reduce timeout');
  const withoutStaller = weightedMean(vectors.slice(0, 3), weights.slice(0, 3));
  const withStaller = weightedMean(vectors, weights);
  const staller = nodes[3]!.peerId.toString();
  const stuck = nodes[2]!.peerId.toString();
  for (const [i, r] of results.slice(0, 2).entries()) {
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.equal(r.status, 'partial');
    assert.match(r.excluded.find((x) => x.peer === staller)?.reason ?? '', /sent nothing for 1000 ms/);
    assert.deepEqual(r.failedParts.map((p) => p.reducer), [stuck]);
    assert.match(r.failedParts[0]!.reason, /returned nothing for 2500 ms/);
    const [s, e] = r.group.parts[r.group.members.findIndex((m) => m.peer === stuck)]!;
    // the stuck reducer's part keeps local values; every other part is, chunk by chunk, the mean of
    // the peers that delivered that chunk: the staller sent only each part's first chunk
    assert.deepEqual(r.vector.subarray(s, e), vectors[i]!.subarray(s, e));
    r.group.parts.forEach(([ps, pe], k) => {
      if (ps === pe || ps === s) return;
      assert.ok(maxAbsDiff(r.vector, withStaller, ps, ps + 400) <= 1e-6, `first chunk of part ${k} includes the staller`);
      assert.ok(maxAbsDiff(r.vector, withoutStaller, ps + 400, pe) <= 1e-6, `rest of part ${k} is averaged without it`);
    });
  }
});
