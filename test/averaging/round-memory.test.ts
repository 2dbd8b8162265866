import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { startSwarm } from '../helpers/swarm.js';
import { averagers, FAST, randomVector } from './helpers.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

test('a finished round releases its buffers at once, not at its all-reduce timeout', async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'round-memory' });
  // a 10-minute round timeout: before, each finished round's vectors stayed referenced until it fired
  const avg = averagers(t, nodes, () => ({ prefix: 'grad', ...FAST, averagingTimeoutMs: 600_000, targetGroupSize: 3 }));
  const n = 1 << 20; // 4 MiB per vector
  const vectors = nodes.map((_, i) => randomVector(n, 7 + i));
  const rounds = 6;
  // a few collections a turn apart: array buffers are freed by weak callbacks after a collection,
  // and the last frames of a round may still sit in a socket's queue for a moment
  const heldBytes = async (): Promise<number> => {
    for (let i = 0; i < 3; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      gc();
    }
    return process.memoryUsage().arrayBuffers;
  };
  // one round first, so what stays for the run (libp2p buffers, compiled code) is in the baseline
  await Promise.all(avg.map((a, i) => a.step(vectors[i]!, { epoch: 0, weight: 1 })));
  const before = await heldBytes();
  for (let epoch = 1; epoch <= rounds; epoch++) {
    const results = await Promise.all(avg.map((a, i) => a.step(vectors[i]!, { epoch, weight: 1 })));
    for (const r of results) assert.ok(r.ok && r.status === 'complete', r.ok ? r.failedParts.map((p) => p.reason).join('; ') : r.reason);
  }
  const grown = (await heldBytes()) - before;
  // each round allocates ≥ 3 × 2 vectors (an output per node, the reducers' chunk copies): 6 rounds
  // held would be ≥ 144 MiB; allow one round's worth for buffers the allocator has not returned yet
  const oneRound = 3 * 2 * 4 * n;
  assert.ok(grown < oneRound, `array buffers grew by ${(grown / 2 ** 20).toFixed(1)} MiB over ${rounds} finished rounds (limit ${oneRound / 2 ** 20} MiB)`);
});
