import assert from 'node:assert/strict';
import { PROGRESS_KEY, progressRecords, type ProgressRecord } from '../../src/collab/records.js';
import type { SwarmNode } from '../../src/swarm/index.js';

/**
 * Stores `node`'s progress record for a minute, as a training peer publishes it; fields not given are
 * those of a peer that has computed nothing yet (at 10 samples/s, measured now).
 */
export async function publishProgress(node: SwarmNode, record: Partial<ProgressRecord> & Pick<ProgressRecord, 'epoch'>): Promise<void> {
  const now = Date.now();
  const stored = await progressRecords(node).store(PROGRESS_KEY, '', { samples: 0, samplesPerSecond: 10, time: now, clientMode: false, totalSamples: 0, computeSeconds: 0, ...record }, now + 60_000);
  assert.ok(stored.replicas > 0, `progress of ${node.peerId.toString()} was stored nowhere`);
}
