import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BAN_AFTER_OFFENCES } from '../../src/averaging/constants.js';
import { AveragingHub } from '../../src/averaging/hub.js';
import { createAverager, keepOffences } from '../../src/averaging/index.js';
import { openStore } from '../../src/store/index.js';
import { startNode, startSwarm, waitFor } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';
import { averagers, FAST, randomVector, weightedMean } from './helpers.js';

/**
 * Issue 17 item 3 on real in-process libp2p nodes: a broken peer whose vector is all NaN and one
 * whose vector is all 1e30 (past the ±1e8 limit) average with three honest peers. Each round they
 * are excluded, so the honest peers end with the honest-only average; after BAN_AFTER_OFFENCES
 * rounds every honest peer has banned them and the next group is the honest peers alone.
 */
test('peers sending NaN or 1e30 parts are excluded every round, then banned for the run: the honest peers always get the honest-only average', async (t) => {
  const nodes = await startSwarm(t, 5, { runId: 'avg-bans' });
  const avg = averagers(t, nodes, () => ({ prefix: 'grad', ...FAST, targetGroupSize: 5, chunkValues: 500 }));
  const n = 3000;
  const [nanPeer, hugePeer] = [nodes[0]!.peerId.toString(), nodes[1]!.peerId.toString()];
  const honestNodes = nodes.slice(2);
  for (let epoch = 0; epoch <= BAN_AFTER_OFFENCES; epoch++) {
    // honest gradients share a direction plus each peer's noise, as gradients of one model do
    const honest = honestNodes.map((_, i) => randomVector(n, 100 * epoch + i + 1, 0.1).map((v) => 1 + v));
    const expected = weightedMean(honest, [1, 1, 1]);
    const results = await Promise.all([
      avg[0]!.step(new Float32Array(n).fill(Number.NaN), { epoch, weight: 1 }),
      avg[1]!.step(new Float32Array(n).fill(1e30), { epoch, weight: 1 }),
      ...avg.slice(2).map((a, i) => a.step(honest[i]!, { epoch, weight: 1 })),
    ]);
    const banned = epoch === BAN_AFTER_OFFENCES;
    for (const [i, r] of results.slice(2).entries()) {
      assert.ok(r.ok, `epoch ${epoch}, honest peer ${i}: ${r.ok ? '' : r.reason}`);
      const members = r.group.members.map((m) => m.peer);
      let err = 0;
      r.vector.forEach((v, j) => (err = Math.max(err, Math.abs(v - expected[j]!))));
      assert.ok(err <= 1e-6, `epoch ${epoch}, honest peer ${i}: max abs error ${err} from the honest-only average (group of ${members.length}, failed parts ${JSON.stringify(r.failedParts)})`);
      if (banned) {
        assert.deepEqual(members.sort(), honestNodes.map((x) => x.peerId.toString()).sort(), `epoch ${epoch}: the banned peers are not admitted`);
        continue;
      }
      assert.equal(members.length, 5, `epoch ${epoch}: before the ban every peer is in the group`);
      const reasons = new Map(r.excluded.map((x) => [x.peer, x.reason]));
      assert.match(reasons.get(nanPeer) ?? '', /non-finite value \(NaN\)/);
      assert.match(reasons.get(hugePeer) ?? '', /holds 1\.0+\d*e\+30 at \d+, beyond the ±100000000 limit/);
    }
    for (const node of honestNodes) {
      const hub = AveragingHub.of(node);
      for (const peer of [nanPeer, hugePeer]) {
        const reason = hub.banned(peer);
        if (epoch + 1 < BAN_AFTER_OFFENCES) assert.equal(reason, undefined, `epoch ${epoch}: banned too early`);
        else assert.match(reason ?? '', new RegExp(`banned for this run after ${BAN_AFTER_OFFENCES} poisoned parts`));
      }
    }
  }
});

test('a reducer answering NaN is an offence like a sender’s: its part keeps local values, and after 3 rounds it is banned', async (t) => {
  const nodes = await startSwarm(t, 4, { runId: 'avg-reducer-bans' });
  const avg = averagers(t, nodes, (i) => ({ prefix: 'grad', ...FAST, targetGroupSize: 4, chunkValues: 500, ...(i === 0 ? { fault: 'nan-reducing' as const } : {}) }));
  const n = 3000;
  const liar = nodes[0]!.peerId.toString();
  const honestNodes = nodes.slice(1);
  for (let epoch = 0; epoch <= BAN_AFTER_OFFENCES; epoch++) {
    const vectors = nodes.map((_, i) => randomVector(n, 100 * epoch + i + 1, 0.1).map((v) => 1 + v));
    const results = await Promise.all(avg.map((a, i) => a.step(vectors[i]!, { epoch, weight: 1 })));
    const banned = epoch === BAN_AFTER_OFFENCES;
    for (const [i, r] of results.slice(1).entries()) {
      assert.ok(r.ok, `epoch ${epoch}, honest peer ${i}: ${r.ok ? '' : r.reason}`);
      assert.ok(r.vector.every(Number.isFinite), `epoch ${epoch}: no NaN reached honest peer ${i}`);
      if (banned) {
        assert.deepEqual(r.group.members.map((m) => m.peer).sort(), honestNodes.map((x) => x.peerId.toString()).sort(), `epoch ${epoch}: the banned reducer is not admitted`);
        assert.equal(r.status, 'complete');
        continue;
      }
      assert.equal(r.group.members.length, 4, `epoch ${epoch}: before the ban every peer is in the group`);
      assert.deepEqual(r.failedParts.map((p) => p.reducer), [liar]);
      assert.match(r.failedParts[0]!.reason, /averaged chunk 0 holds NaN at 0, not a finite value/);
      const [s, e] = r.group.parts[r.group.members.findIndex((m) => m.peer === liar)]!;
      assert.deepEqual(r.vector.subarray(s, e), vectors[i + 1]!.subarray(s, e), `epoch ${epoch}: the liar's part keeps local values`);
    }
    for (const node of honestNodes) {
      const reason = AveragingHub.of(node).banned(liar);
      if (epoch + 1 < BAN_AFTER_OFFENCES) assert.equal(reason, undefined, `epoch ${epoch}: banned too early`);
      else assert.match(reason ?? '', /banned for this run after 3 poisoned parts \(last: peer .*averaged chunk 0 holds NaN/);
    }
  }
});

/**
 * A node that banned a peer keeps refusing it after a restart on the same store (the bans are kept
 * per run in the store): before the restart the NaN peer was in every group; after it, the restarted
 * node, with the NaN peer as the only other peer averaging, forms no group.
 */
test('a ban outlives a restart of the node that made it: the restarted node, on the same store, refuses the banned peer', async (t) => {
  const runId = 'avg-bans-restart';
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  const [liarNode, keeperNode, otherNode] = await startSwarm(t, 3, { runId });
  keepOffences(keeperNode!, store.offences.forRun(runId));
  const init = { prefix: 'grad', ...FAST, targetGroupSize: 3, minGroupSize: 2, chunkValues: 500 };
  const [liar, other] = averagers(t, [liarNode!, otherNode!], () => init);
  const keeper = createAverager(keeperNode!, init);
  const liarId = liarNode!.peerId.toString();
  const n = 1000;
  for (let epoch = 0; epoch < BAN_AFTER_OFFENCES; epoch++) {
    const results = await Promise.all([liar!.step(new Float32Array(n).fill(Number.NaN), { epoch, weight: 1 }), keeper.step(new Float32Array(n).fill(1), { epoch, weight: 1 }), other!.step(new Float32Array(n).fill(1), { epoch, weight: 1 })]);
    const kept = results[1];
    assert.ok(kept.ok, `epoch ${epoch}: ${kept.ok ? '' : kept.reason}`);
    assert.ok(kept.group.members.some((m) => m.peer === liarId), `epoch ${epoch}: before the ban the NaN peer is in the group`);
  }
  assert.match(AveragingHub.of(keeperNode!).banned(liarId) ?? '', /banned for this run after 3 poisoned parts/);
  await keeper.stop();
  await keeperNode!.stop();

  const restarted = await startNode(t, { runId, initialPeers: liarNode!.multiaddrs() });
  await waitFor('the restarted node to serve the DHT and know the others', () => restarted.reachability === 'public' && restarted.stats().routingTableSize >= 2);
  keepOffences(restarted, store.offences.forRun(runId));
  assert.match(AveragingHub.of(restarted).banned(liarId) ?? '', /banned for this run after 3 poisoned parts \(last: .*NaN/, 'the ban is read back from the store');
  const again = createAverager(restarted, { ...init, matchmakingTimeMs: 4000, averagingExpirationMs: 6000 });
  t.after(() => again.stop());
  const epoch = BAN_AFTER_OFFENCES;
  const [, afterRestart] = await Promise.all([liar!.step(new Float32Array(n).fill(Number.NaN), { epoch, weight: 1 }), again.step(new Float32Array(n).fill(1), { epoch, weight: 1 })]);
  assert.equal(afterRestart.ok, false, `the restarted node averaged with the banned peer: ${afterRestart.ok ? JSON.stringify(afterRestart.group.members.map((m) => m.peer)) : ''}`);
});
