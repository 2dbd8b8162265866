// PowerSGD over the wire: real libp2p nodes in one process average gradients in two all-reduces (P,
// then Q) with the one group matchmaking found, and get what PowerSGD's arithmetic gives with exact
// means; when a member drops between the phases the others retry phase Q without it (a retry that
// fails ends in a local step, in bounded time); one left out of phase P (NaN, a stall) fails its own
// round alone.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BAN_AFTER_OFFENCES } from '../../src/averaging/constants.js';
import type { AveragingEvent } from '../../src/averaging/averager.js';
import { AveragingHub } from '../../src/averaging/hub.js';
import { PowerSgd, powerSgdLayout, type GradientTensor } from '../../src/averaging/powersgd.js';
import type { SwarmNode } from '../../src/swarm/index.js';
import { startNode, startSwarm } from '../helpers/swarm.js';
import { averagers, FAST, randomVector } from './helpers.js';

// a 60×50 matrix, a 3-D tensor viewed as 24×(5·6), a bias vector: the matrices are compressed at rank 4
const TENSORS: GradientTensor[] = [
  { offset: 0, shape: [60, 50] },
  { offset: 3000, shape: [24, 5, 6] },
  { offset: 3720, shape: [50] },
];
const SIZE = 3770;
const RANK = 4;

const layout = () => powerSgdLayout(TENSORS, RANK, 0.5);

/** The weighted mean of each peer's vector, as the reducers compute it with aggregation 'mean'. */
function mean(vs: readonly Float32Array[], weights: readonly number[]): Float32Array {
  const total = weights.reduce((a, b) => a + b, 0);
  const out = new Float32Array(vs[0]!.length);
  vs.forEach((v, k) => v.forEach((x, i) => (out[i]! += (weights[k]! / total) * x)));
  return out;
}

const relErr = (a: Float32Array, b: Float32Array): number => {
  let d = 0;
  let n = 0;
  for (let i = 0; i < a.length; i++) {
    d += (a[i]! - b[i]!) ** 2;
    n += b[i]! ** 2;
  }
  return Math.sqrt(d / n);
};

test('three peers average PowerSGD-compressed gradients in two phases of one group: each applies what the arithmetic gives', async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'psgd-round' });
  const compressors = nodes.map(() => new PowerSgd(layout(), 11));
  const reference = nodes.map(() => new PowerSgd(layout(), 11));
  const avg = averagers(t, nodes, (i) => ({ prefix: 'grad', ...FAST, targetGroupSize: 3, chunkValues: 300, aggregation: 'mean', powerSgd: compressors[i]! }));
  const weights = [1, 2, 3];
  for (const epoch of [0, 1]) {
    const grads = nodes.map((_, i) => randomVector(SIZE, 100 * epoch + i));
    const results = await Promise.all(avg.map((a, i) => a.step(grads[i]!, { epoch, weight: weights[i]! })));
    // the reference: the same arithmetic with the means taken here
    const p = mean(reference.map((s, i) => s.phaseP(grads[i]!)), weights);
    const q = mean(reference.map((s, i) => s.phaseQ(p, grads[i]!)), weights);
    const expected = new Float32Array(SIZE);
    reference.forEach((s) => s.finish(q, expected));
    for (const [i, r] of results.entries()) {
      assert.ok(r.ok, r.ok ? '' : r.reason);
      assert.equal(r.status, 'complete');
      assert.equal(r.group.members.length, 3);
      assert.equal(r.group.size, SIZE, 'the result names the matched group, of the gradient’s size');
      assert.ok(relErr(r.vector, expected) < 1e-5, `epoch ${epoch}, peer ${i}: relative error ${relErr(r.vector, expected)}`);
      assert.ok(relErr(compressors[i]!.qs, reference[i]!.qs) < 1e-5, 'the next round’s Q is the averaged Q');
      assert.ok(relErr(compressors[i]!.errors, reference[i]!.errors) < 1e-4, 'the error buffer holds what the approximation missed');
      assert.deepEqual(r.powerSgd, { rank: RANK, ratio: SIZE / (layout().pLength + layout().qLength) });
      // plain averaging sends each of the 2 other reducers its share of 4-byte values; PowerSGD sends P and Q instead
      assert.ok(r.bytesSent < 0.6 * 4 * SIZE * (2 / 3), `peer ${i} sent ${r.bytesSent} bytes`);
    }
    assert.deepEqual(results.map((r) => (r.ok ? r.vector : undefined))[0], results.map((r) => (r.ok ? r.vector : undefined))[1], 'every peer applies the same gradient');
  }
});

test('a plain averager and a PowerSGD one never group: their schema hashes differ', async (t) => {
  const nodes = await startSwarm(t, 2, { runId: 'psgd-mixed' });
  const avg = averagers(t, nodes, (i) => ({ prefix: 'grad', ...FAST, matchmakingTimeMs: 2000, targetGroupSize: 2, ...(i === 0 ? { powerSgd: new PowerSgd(layout(), 1) } : {}) }));
  const results = await Promise.all(avg.map((a, i) => a.step(randomVector(SIZE, i), { epoch: 0, weight: 1 })));
  for (const r of results) assert.ok(!r.ok && r.stage === 'matchmaking', r.ok ? `grouped with ${r.group.members.length}` : r.reason);
});

/**
 * Compressors of `survivors` peers and of one that leaves after phase P, as a volunteer that quits or
 * crashes mid-round: it never computes its Q, and its node stops once every one of them has its
 * averaged P (stopping as soon as its own phase P ends could cut off its answers still on their way).
 */
function leavingAfterPhaseP(leaver: SwarmNode, survivors: number, seed: number): PowerSgd[] {
  let arrived = 0;
  const arrive = (): void => {
    if (++arrived === survivors + 1) void leaver.stop();
  };
  class Staying extends PowerSgd {
    override phaseQ(averagedP: Float32Array, gradient: Float32Array): Float32Array {
      arrive();
      return super.phaseQ(averagedP, gradient);
    }
  }
  class Leaving extends PowerSgd {
    override phaseQ(_averagedP: Float32Array, _gradient: Float32Array): Float32Array {
      arrive();
      throw new Error('this peer left between the phases');
    }
  }
  return [...Array.from({ length: survivors }, () => new Staying(layout(), seed)), new Leaving(layout(), seed)];
}

test('a member that drops between phase P and phase Q: the others retry phase Q among themselves and apply the arithmetic of their own Q on the P all three averaged, with their weights', async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'psgd-drop' });
  const compressors = leavingAfterPhaseP(nodes[2]!, 2, 3);
  const reference = nodes.map(() => new PowerSgd(layout(), 3));
  const events: AveragingEvent[][] = nodes.map(() => []);
  const init = { ...FAST, senderTimeoutMs: 2000, reducerTimeoutMs: 3000, averagingTimeoutMs: 15_000 };
  const avg = averagers(t, nodes, (i) => ({ prefix: 'grad', ...init, targetGroupSize: 3, chunkValues: 300, aggregation: 'mean', powerSgd: compressors[i]!, onEvent: (e) => events[i]!.push(e) }));
  const weights = [1, 2, 3];
  const grads = nodes.map((_, i) => randomVector(SIZE, 7 + i));
  const started = Date.now();
  const results = await Promise.allSettled(avg.map((a, i) => a.step(grads[i]!, { epoch: 0, weight: weights[i]! })));
  assert.ok(Date.now() - started < init.matchmakingTimeMs! + init.averagingTimeoutMs, 'no peer waits past matchmaking + the averaging timeout');
  assert.equal(results[2]!.status, 'rejected');
  // the leaver's P is in the basis; its Q is not: the survivors' Q, weighted 1 : 2
  const p = mean(reference.map((s, i) => s.phaseP(grads[i]!)), weights);
  const q = mean(reference.slice(0, 2).map((s, i) => s.phaseQ(p, grads[i]!)), weights.slice(0, 2));
  const expected = new Float32Array(SIZE);
  reference.slice(0, 2).forEach((s) => s.finish(q, expected));
  const survivors = nodes.slice(0, 2).map((n) => n.peerId.toString());
  for (const [i, settled] of results.slice(0, 2).entries()) {
    assert.equal(settled.status, 'fulfilled');
    const r = settled.value;
    assert.ok(r.ok && r.status === 'complete', r.ok ? r.failedParts.map((f) => f.reason).join('; ') : r.reason);
    assert.deepEqual(r.group.members.map((m) => m.peer).sort(), survivors.sort(), 'the result names the members whose Q was averaged');
    assert.equal(r.group.size, SIZE);
    assert.ok(relErr(r.vector, expected) < 1e-5, `peer ${i}: relative error ${relErr(r.vector, expected)}`);
    assert.ok(relErr(compressors[i]!.qs, reference[i]!.qs) < 1e-5, 'the next round’s Q is the survivors’ averaged Q');
    assert.ok(relErr(compressors[i]!.errors, reference[i]!.errors) < 1e-4, 'the error buffer holds what the approximation missed');
    const averaged = events[i]!.find((e) => e.type === 'averaged');
    assert.ok(averaged?.type === 'averaged' && averaged.mode === 'powersgd' && averaged.result.group.members.length === 2 && averaged.result.bytesSent === r.bytesSent, `peer ${i}'s 'averaged' event: ${JSON.stringify(averaged?.type === 'averaged' ? { ...averaged.result, vector: undefined } : averaged)}`);
    assert.ok(!events[i]!.some((e) => e.type === 'failed'), 'no failed event for a round that completed');
  }
});

test('a retried phase Q that a member does not join (its own phase P failed, so it never retries) fails cleanly, in bounded time, and the error buffers are as before', async (t) => {
  const nodes = await startSwarm(t, 4, { runId: 'psgd-retry-fails' });
  // peer 2 sends NaN (left out of phase P: it reduces its phase-Q part withheld, then stops), peer 3 leaves after phase P
  const [a, b, leaver] = leavingAfterPhaseP(nodes[3]!, 2, 6);
  const compressors = [a!, b!, new PowerSgd(layout(), 6), leaver!];
  const init = { ...FAST, senderTimeoutMs: 2000, reducerTimeoutMs: 3000, averagingTimeoutMs: 20_000 };
  const avg = averagers(t, nodes, (i) => ({ prefix: 'grad', ...init, targetGroupSize: 4, chunkValues: 300, powerSgd: compressors[i]! }));
  const grads = [randomVector(SIZE, 21), randomVector(SIZE, 22), new Float32Array(SIZE).fill(Number.NaN), randomVector(SIZE, 24)];
  const started = Date.now();
  const results = await Promise.allSettled(avg.map((a, i) => a.step(grads[i]!, { epoch: 0, weight: 1 })));
  assert.ok(Date.now() - started < init.matchmakingTimeMs! + init.averagingTimeoutMs, 'no peer waits past matchmaking + the averaging timeout');
  assert.equal(results[3]!.status, 'rejected');
  for (const [i, settled] of results.slice(0, 3).entries()) {
    assert.equal(settled.status, 'fulfilled');
    const r = settled.value;
    assert.ok(!r.ok && r.code === 'PHASE_INCOMPLETE', r.ok ? `peer ${i}'s round completed` : r.reason);
    if (i < 2) assert.match(r.reason, /PowerSGD phase Q with 4 peers left 1 part\(s\) unaveraged: .*; retried among 3 members, it left 1 part\(s\) unaveraged/);
    else assert.match(r.reason, /PowerSGD phase P with 4 peers/);
    if (i < 2) assert.ok(compressors[i]!.errors.every((x) => x === 0), `peer ${i}: the gradient went back out of the error buffer (the caller steps on it locally)`);
  }
});

test('when the member that leaves after phase P was the only one reducing (the others are in client mode), nobody is left to reduce a retry: the others’ round fails with a reason, it does not throw', async (t) => {
  // the first server only keeps the swarm's records (one peer alone stores none), it does not average
  const [records, server] = await startSwarm(t, 2, { runId: 'psgd-clients' });
  const clients = [];
  for (let i = 0; i < 2; i++) clients.push(await startNode(t, { runId: 'psgd-clients', clientMode: true, listen: [], initialPeers: records!.multiaddrs() }));
  await Promise.all(clients.map((c) => c.ready));
  const nodes = [...clients, server!];
  const compressors = leavingAfterPhaseP(server!, 2, 8);
  const avg = averagers(t, nodes, (i) => ({ prefix: 'grad', ...FAST, targetGroupSize: 3, chunkValues: 300, powerSgd: compressors[i]! }));
  const results = await Promise.allSettled(avg.map((a, i) => a.step(randomVector(SIZE, 30 + i), { epoch: 0, weight: 1 })));
  assert.equal(results[2]!.status, 'rejected');
  for (const [i, settled] of results.slice(0, 2).entries()) {
    assert.equal(settled.status, 'fulfilled', `client ${i}: ${settled.status === 'rejected' ? String(settled.reason) : ''}`);
    const r = settled.value;
    assert.ok(!r.ok && r.code === 'PHASE_INCOMPLETE', r.ok ? `client ${i}'s round completed` : r.reason);
    assert.match(r.reason, /^PowerSGD phase Q with 3 peers left 1 part\(s\) unaveraged: [^;]*$/, 'no retry');
    assert.ok(compressors[i]!.errors.every((x) => x === 0), `client ${i}: the gradient went back out of the error buffer`);
  }
});

test('a member that stalls in phase P (a slow uplink) is left out of it, and the others’ round completes without it: it still reduces its part of phase Q, its own values left out', async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'psgd-stall' });
  const compressors = nodes.map(() => new PowerSgd(layout(), 9));
  // 50-value chunks: each P part is several chunks, and the staller sends only the first of each
  const stallerEvents: AveragingEvent[] = [];
  const avg = averagers(t, nodes, (i) => ({ prefix: 'grad', ...FAST, targetGroupSize: 3, chunkValues: 50, aggregation: 'mean', powerSgd: compressors[i]!, ...(i === 2 ? { fault: 'stall-sending' as const, onEvent: (e: AveragingEvent) => stallerEvents.push(e) } : {}) }));
  const grads = nodes.map((_, i) => randomVector(SIZE, 40 + i));
  const results = await Promise.all(avg.map((a, i) => a.step(grads[i]!, { epoch: 0, weight: 1 })));
  const bias = TENSORS[2]!.offset;
  for (const [i, r] of results.slice(0, 2).entries()) {
    assert.ok(r.ok && r.status === 'complete', r.ok ? r.failedParts.map((f) => f.reason).join('; ') : r.reason);
    assert.equal(r.group.members.length, 3);
    assert.deepEqual(r.vector, results[0]!.ok ? results[0]!.vector : undefined, `peer ${i} applies what the other honest member applies`);
    // the uncompressed bias travels in phase Q: its average is the two honest members' alone
    const honestBias = grads[0]!.subarray(bias).map((x, k) => (x + grads[1]![bias + k]!) / 2);
    assert.ok(relErr(r.vector.subarray(bias), honestBias) < 1e-6, `peer ${i}: the bias average holds the staller's values (relative error ${relErr(r.vector.subarray(bias), honestBias)})`);
  }
  const staller = results[2]!;
  assert.ok(!staller.ok && staller.code === 'PHASE_INCOMPLETE' && /phase P/.test(staller.reason), staller.ok ? 'the staller’s round completed' : staller.reason);
  assert.ok(compressors[2]!.errors.every((x) => x === 0), 'the staller’s gradient went back out of its error buffer (it steps locally)');
  // what it sent in its failed round (its first P chunks, its phase-Q part's averages) counts in its epoch's bytes
  const failed = stallerEvents.find((e) => e.type === 'failed');
  assert.ok(failed?.type === 'failed' && failed.stage === 'allreduce' && failed.bytesSent! > 0, `the staller's 'failed' event names the bytes it sent: ${JSON.stringify(failed)}`);
});

test('members whose P parts hold NaN or values past the limit never reach the honest members’ gradients: the honest members’ rounds complete without them (the hostile ones, their phase P failed, still reduce their phase-Q parts with their own values left out), and once banned they are not admitted', async (t) => {
  const nodes = await startSwarm(t, 4, { runId: 'psgd-hostile' });
  const compressors = nodes.map(() => new PowerSgd(layout(), 5));
  const reference = [0, 1].map(() => new PowerSgd(layout(), 5));
  const avg = averagers(t, nodes, (i) => ({ prefix: 'grad', ...FAST, targetGroupSize: 4, chunkValues: 300, aggregation: 'mean', powerSgd: compressors[i]! }));
  const hostile = [nodes[2]!, nodes[3]!].map((n) => n.peerId.toString());
  for (let epoch = 0; epoch <= BAN_AFTER_OFFENCES; epoch++) {
    const honest = [0, 1].map((i) => randomVector(SIZE, 10 * epoch + i + 1));
    // their P parts are all NaN, or 1e30 times the projections: past the ±1e8 limit
    const results = await Promise.all([...honest.map((g, i) => avg[i]!.step(g, { epoch, weight: 1 })), avg[2]!.step(new Float32Array(SIZE).fill(Number.NaN), { epoch, weight: 1 }), avg[3]!.step(new Float32Array(SIZE).fill(1e30), { epoch, weight: 1 })]);
    const p = mean(reference.map((s, k) => s.phaseP(honest[k]!)), [1, 1]);
    const q = mean(reference.map((s, k) => s.phaseQ(p, honest[k]!)), [1, 1]);
    const expected = new Float32Array(SIZE);
    reference.forEach((s) => s.finish(q, expected));
    for (const [i, r] of results.slice(0, 2).entries()) {
      assert.ok(r.ok && r.status === 'complete', r.ok ? r.failedParts.map((f) => f.reason).join('; ') : `epoch ${epoch}: ${r.reason}`);
      const members = r.group.members.map((m) => m.peer);
      if (epoch < BAN_AFTER_OFFENCES) assert.equal(members.length, 4, 'before the ban the hostile members are in the group');
      else assert.deepEqual(members.sort(), [nodes[0]!, nodes[1]!].map((n) => n.peerId.toString()).sort(), 'the banned members are not admitted');
      assert.ok(relErr(r.vector, expected) < 1e-5, `epoch ${epoch}, peer ${i}: relative error ${relErr(r.vector, expected)} from the honest-only round`);
      assert.ok(relErr(compressors[i]!.qs, reference[i]!.qs) < 1e-5, 'the next round’s Q is the honest members’ average');
      assert.ok(relErr(compressors[i]!.errors, reference[i]!.errors) < 1e-4, 'the error buffer holds what the honest approximation missed');
    }
    if (epoch < BAN_AFTER_OFFENCES) for (const r of results.slice(2)) assert.ok(!r.ok && r.code === 'PHASE_INCOMPLETE', r.ok ? 'a hostile member’s round completed' : r.reason);
  }
  for (const node of nodes.slice(0, 2)) for (const peer of hostile) assert.match(AveragingHub.of(node).banned(peer) ?? '', /banned for this run/);
});
