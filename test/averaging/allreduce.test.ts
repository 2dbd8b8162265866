import assert from 'node:assert/strict';
import { test } from 'node:test';
import { COMPRESSIONS, type Compression } from '../../src/averaging/index.js';
import { startNode, startSwarm } from '../helpers/swarm.js';
import { averagers, CROWDED, CROWDED_START_MS, FAST, maxAbsDiff, randomVector, weightedMean } from './helpers.js';

test('3 peers with unequal weights and bandwidths average to the weighted mean; parts follow the load-balancing LP', async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'avg-basic' });
  const bandwidths = [1e6, 3e6, 2e6];
  const avg = averagers(t, nodes, (i) => ({ prefix: 'grad', ...FAST, targetGroupSize: 3, chunkValues: 1000, bandwidthBytesPerS: bandwidths[i]! }));
  const n = 10_007;
  const vectors = [0, 1, 2].map((i) => randomVector(n, i + 1));
  const weights = [1, 5, 2];
  const results = await Promise.all(avg.map((a, i) => a.step(vectors[i]!, { epoch: 0, weight: weights[i]! })));
  const expected = weightedMean(vectors, weights);
  const groupIds = new Set<string>();
  for (const r of results) {
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.equal(r.status, 'complete');
    assert.deepEqual(r.failedParts, []);
    assert.equal(r.group.members.length, 3);
    groupIds.add(r.group.id);
    assert.ok(maxAbsDiff(r.vector, expected) <= 1e-6, `max abs err ${maxAbsDiff(r.vector, expected)}`);
    assert.ok(r.bytesSent > 0 && r.bytesReceived > 0);
    // what the round cost the CPU: the main thread was busy for part of the round, never longer (1 ms: Date.now()'s granularity)
    assert.equal(r.cpu.bytes, n * 4);
    assert.ok(r.cpu.busySeconds > 0 && r.cpu.busySeconds <= (r.durationMs + 1) / 1000, `busy ${r.cpu.busySeconds} s in a round of ${r.durationMs} ms`);
    assert.ok(r.cpu.processSeconds > 0);
    // the LP's split (time_i = (1 + w_i) ÷ b_i): 3e6 at the cap of 2/3, 2e6 the other third, and
    // 1e6, far slower than the others, reduces none — uneven parts, still the exact weighted mean
    const expectedPart = new Map<number, number>([[3e6, 6671], [2e6, 3336], [1e6, 0]]);
    for (const [i, m] of r.group.members.entries()) {
      const [s, e] = r.group.parts[i]!;
      const size: number = e - s;
      assert.equal(size, expectedPart.get(m.bandwidth), `part of ${m.peer}: ${size} values for bandwidth ${m.bandwidth}`);
    }
  }
  assert.equal(groupIds.size, 1, 'everyone is in the same group');
  // the inputs are not modified
  assert.deepEqual(vectors[0], randomVector(n, 1));
});

test('a client-mode peer only sends and reduces nothing; compressed rounds stay within their bounds', async (t) => {
  const servers = await startSwarm(t, 3, { runId: 'avg-client' });
  const client = await startNode(t, { runId: 'avg-client', clientMode: true, listen: [], initialPeers: servers[0]!.multiaddrs() });
  await client.ready;
  const nodes = [...servers, client];
  // one averager per compression (prefixes keep their groups apart)
  // blockwise4: a sender's part and the reducer's average are each rounded to NF4, each off by at most 0.152 × its block's absmax (≤ 1)
  const bounds: Record<Compression, number> = { none: 1e-6, fp16: 1e-3, uniform8: 0.03, blockwise8: 0.01, blockwise4: 0.31 };
  const n = 6000;
  const vectors = nodes.map((_, i) => randomVector(n, 10 + i));
  const weights = [3, 1, 2, 4];
  const expected = weightedMean(vectors, weights);
  const sent = new Map<Compression, number>();
  for (const compression of COMPRESSIONS) {
    const avg = averagers(t, nodes, () => ({ prefix: `c-${compression}`, ...FAST, targetGroupSize: 4, compression, chunkValues: 2048 }));
    const results = await Promise.all(avg.map((a, i) => a.step(vectors[i]!, { epoch: 0, weight: weights[i]! })));
    for (const [i, r] of results.entries()) {
      assert.ok(r.ok, r.ok ? '' : r.reason);
      assert.equal(r.status, 'complete', JSON.stringify(r.failedParts));
      assert.equal(r.group.compression, compression);
      const err = maxAbsDiff(r.vector, expected);
      assert.ok(err <= bounds[compression], `${compression}, peer ${i}: max abs err ${err} > ${bounds[compression]}`);
      const c = r.group.members.findIndex((m) => m.peer === client.peerId.toString());
      assert.equal(r.group.members[c]!.clientMode, true);
      assert.equal(r.group.parts[c]![1] - r.group.parts[c]![0], 0, 'the client-mode peer reduces nothing');
      // every member ends with the very same values (the reducer keeps what it sends)
      assert.deepEqual(r.vector, results[0]!.ok ? results[0]!.vector : undefined);
    }
    if (compression !== 'none') {
      const first = results[0]!;
      assert.ok(first.ok && first.bytesSent < 4 * n, `${compression} sends fewer bytes than fp32 (${first.ok ? first.bytesSent : 0})`);
    }
    sent.set(compression, results[0]!.ok ? results[0]!.bytesSent : 0);
  }
  // 4.5 bits per value with its scales against blockwise8's 8 (measured: 5803 bytes against 10183)
  assert.ok(sent.get('blockwise4')! < 0.6 * sent.get('blockwise8')!, `blockwise4 sent ${sent.get('blockwise4')} bytes, blockwise8 ${sent.get('blockwise8')}`);
});

test('8 peers average small vectors in one group', async (t) => {
  const nodes = await startSwarm(t, 8, { runId: 'avg-eight' }, CROWDED_START_MS);
  const avg = averagers(t, nodes, () => ({ prefix: 'grad', ...CROWDED, targetGroupSize: 8, chunkValues: 256 }));
  const n = 2000;
  const vectors = nodes.map((_, i) => randomVector(n, 100 + i));
  const weights = nodes.map((_, i) => i + 1);
  const results = await Promise.all(avg.map((a, i) => a.step(vectors[i]!, { epoch: 3, weight: weights[i]! })));
  const expected = weightedMean(vectors, weights);
  for (const r of results) {
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.equal(r.group.members.length, 8);
    assert.equal(r.status, 'complete');
    assert.ok(maxAbsDiff(r.vector, expected) <= 1e-6);
  }
});
