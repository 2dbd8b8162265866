import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_PART_SHARE_FACTOR } from '../../src/averaging/constants.js';
import { chunkRange, partRanges, partShares, partSizes } from '../../src/averaging/load-balancing.js';
import { centeredClip, PartReducer, PeerFault, trimmedMean } from '../../src/averaging/reducer.js';
import { maxAbsDiff } from './helpers.js';

const peers = (bandwidths: number[]) => bandwidths.map((bandwidth, i) => ({ peerId: `p${i}`, bandwidth, clientMode: false }));

test("parts solve hivemind's load-balancing LP: integral, complete, client-mode peers and far slower peers get none", () => {
  const sizes = partSizes(1000, [
    { peerId: 'a', bandwidth: 100, clientMode: false },
    { peerId: 'b', bandwidth: 300, clientMode: false },
    { peerId: 'c', bandwidth: 1e9, clientMode: true },
    { peerId: 'd', bandwidth: 200, clientMode: false },
  ]);
  // n = 4: time_i = (1 + 2·w_i) ÷ b_i. b at 2/3 (the cap of 2 × 1/3) and d at 1/3 both take 1/120;
  // a alone (w = 0) already takes 1/100, so any value it reduced would only make it slower
  assert.deepEqual(sizes, [0, 667, 0, 333]);
  assert.deepEqual(partRanges(sizes), [[0, 0], [0, 667], [667, 667], [667, 1000]]);
  assert.equal(partSizes(7, [{ peerId: 'a', bandwidth: 1, clientMode: false }, { peerId: 'b', bandwidth: 1, clientMode: false }, { peerId: 'c', bandwidth: 1, clientMode: false }]).reduce((x, y) => x + y), 7);
  assert.deepEqual(partSizes(1000, peers([1, 999])), [1, 999], 'two members: every split moves the same bytes, so bandwidth proportions');
  assert.throws(() => partSizes(10, [{ peerId: 'c', bandwidth: 5, clientMode: true }]), /no peer can reduce/);
  assert.throws(() => partSizes(-1, []), /non-negative integer/);
});

test('the LP split is optimal within its constraints: no reducer could take more or less without slowing the slowest peer', () => {
  // 200 seeded groups of 3–12 members, bandwidths spread over three orders of magnitude, some clients
  let seed = 7;
  const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let g = 0; g < 200; g++) {
    const n = 3 + Math.floor(random() * 10);
    const group = Array.from({ length: n }, (_, i) => ({ peerId: `p${i}`, bandwidth: 1e5 * 1000 ** random(), clientMode: i > 0 && random() < 0.2 }));
    const w = partShares(group);
    const reducers = group.filter((p) => !p.clientMode);
    const cap = Math.min(1, MAX_PART_SHARE_FACTOR / reducers.length);
    assert.ok(Math.abs(w.reduce((a, b) => a + b, 0) - 1) < 1e-9, `shares sum to ${w.reduce((a, b) => a + b, 0)}`);
    const time = group.map((p, i) => (1 + (n - 2) * w[i]!) / p.bandwidth);
    const slowest = Math.max(...reducers.map((p) => time[group.indexOf(p)]!));
    // the water level: the slowest of the peers that reduce something
    const level = Math.max(...group.map((_, i) => (w[i]! > 1e-12 ? time[i]! : 0)));
    const equal = Math.max(...reducers.map((p) => (1 + (n - 2) / reducers.length) / p.bandwidth));
    assert.ok(slowest <= equal * (1 + 1e-9), `balanced ${slowest} is slower than the equal split's ${equal}`);
    for (const [i, p] of group.entries()) {
      const what = `group ${g}, peer ${i} (bandwidth ${p.bandwidth.toPrecision(3)}, share ${w[i]})`;
      if (p.clientMode) assert.equal(w[i], 0, what);
      assert.ok(w[i]! >= 0 && w[i]! <= cap + 1e-12, what);
      // KKT: a peer strictly between 0 and the cap is exactly at the level; one at 0 is at least that slow
      // with nothing to reduce (any value would slow it further); one at the cap is no slower
      if (p.clientMode) continue;
      if (w[i]! > 1e-12 && w[i]! < cap - 1e-12) assert.ok(Math.abs(time[i]! / level - 1) < 1e-9, what);
      else if (w[i]! <= 1e-12) assert.ok(1 / p.bandwidth >= level * (1 - 1e-9), what);
      else assert.ok(time[i]! <= level * (1 + 1e-9), what);
    }
  }
});

test('the reducer computes the sample-weighted mean chunk by chunk', () => {
  const size = 10;
  const weights = new Map([['a', 1], ['b', 3]]);
  const r = new PartReducer(size, 4, weights);
  const a = Float32Array.from({ length: size }, (_, i) => i);
  const b = Float32Array.from({ length: size }, (_, i) => 10 - i);
  assert.equal(r.chunks, 3);
  for (let c = 0; c < r.chunks; c++) {
    const [s, e] = chunkRange(size, 4, c);
    r.add('a', c, a.subarray(s, e));
    assert.equal(r.isChunkDone(c), false);
    assert.deepEqual(r.pending(c), ['b']);
    r.add('b', c, b.subarray(s, e));
    const avg = r.chunkAverage(c);
    avg.forEach((v, i) => assert.ok(Math.abs(v - (1 * a[s + i]! + 3 * b[s + i]!) / 4) < 1e-6));
  }
  assert.equal(r.isDone(), true);
});

test('bad chunks are refused without touching the sum: wrong length, order, NaN, Inf, huge, unknown sender', () => {
  const r = new PartReducer(4, 4, new Map([['good', 1], ['bad', 1]]));
  const fault = (f: () => void, pattern: RegExp) => assert.throws(f, (e: unknown) => e instanceof PeerFault && pattern.test(e.message));
  fault(() => r.add('bad', 0, new Float32Array(3)), /3 values, expected 4/);
  fault(() => r.add('bad', 1, new Float32Array(4)), /sent chunk 1, expected chunk 0/);
  fault(() => r.add('bad', 0, Float32Array.of(1, Number.NaN, 0, 0)), /non-finite value \(NaN\) at 1/);
  fault(() => r.add('bad', 0, Float32Array.of(Infinity, 0, 0, 0)), /non-finite/);
  fault(() => r.add('bad', 0, Float32Array.of(0, 0, 0, 1e12)), /beyond the/);
  fault(() => r.add('stranger', 0, new Float32Array(4)), /not a sender/);
  r.exclude('bad', 'sent NaN');
  fault(() => r.add('bad', 0, new Float32Array(4)), /was excluded \(sent NaN\)/);
  r.add('good', 0, Float32Array.of(1, 2, 3, 4));
  assert.deepEqual(Array.from(r.chunkAverage(0)), [1, 2, 3, 4], 'the average is over the good sender only');
  assert.deepEqual([...r.excludedPeers().keys()], ['bad']);
});

test('a sender that vanishes mid-part stays in the chunks it delivered and leaves the rest', () => {
  const r = new PartReducer(4, 2, new Map([['a', 1], ['b', 1]]));
  r.add('a', 0, Float32Array.of(2, 2));
  r.add('b', 0, Float32Array.of(4, 4));
  r.add('a', 1, Float32Array.of(6, 6));
  assert.throws(() => r.chunkAverage(1), /still waiting for b/);
  r.exclude('b', 'timed out');
  assert.deepEqual(Array.from(r.chunkAverage(0)), [3, 3]);
  assert.deepEqual(Array.from(r.chunkAverage(1)), [6, 6]);
  assert.equal(r.isDone(), true);
});

test('weights must be finite and non-negative; a chunk nobody with weight delivered has no average', () => {
  assert.throws(() => new PartReducer(2, 2, new Map([['a', -1]])), /weight -1/);
  assert.throws(() => new PartReducer(2, 2, new Map([['a', Number.NaN]])), /weight NaN/);
  const r = new PartReducer(2, 2, new Map([['aux', 0]]));
  r.add('aux', 0, Float32Array.of(1, 1));
  assert.throws(() => r.chunkAverage(0), /no sender with a positive weight/);
});

test('no reducer gets more than twice an equal share, whatever bandwidth it declares; the rest solve the LP', () => {
  // the attack: bandwidth 1e12 among three peers at 1e6 claimed 99,998 of 100,000 values
  assert.deepEqual(partSizes(100_000, peers([1e12, 1e6, 1e6, 1e6])), [50_000, 16_667, 16_667, 16_666]);
  assert.deepEqual(partSizes(90, peers([1e12, 1e12, 1, 2])), [45, 45, 0, 0], 'two capped parts may take everything');
  // n = 3: time_i = (1 + w_i) ÷ b_i; 100 at the cap (2/3), 10 takes the rest (4/30), 1 takes 1 alone
  assert.deepEqual(partSizes(1000, peers([1, 10, 100])), [0, 333, 667], 'the capped part sheds to the others, the far slower one gets none');
  assert.deepEqual(partSizes(1000, peers([125e6, 12.5e6, 6.25e6, 2.5e6])), [500, 500, 0, 0], "the bench's 1 Gbit/100/50/20 Mbit/s mix");
  assert.deepEqual(partSizes(800, peers([1e9, 1, 1, 1, 1, 1, 1, 1])), [200, 86, 86, 86, 86, 86, 85, 85]);
});

/** `n` inputs of `dim` values around `center`, spread ±`noise`, weight 1 each (deterministic). */
function around(center: number, n: number, dim: number, noise: number): Array<{ w: number; x: Float32Array }> {
  return Array.from({ length: n }, (_, k) => ({ w: 1, x: Float32Array.from({ length: dim }, (_, j) => center + noise * Math.sin(7 * k + 3 * j + 1)) }));
}

function mean(inputs: ReadonlyArray<{ w: number; x: Float32Array }>): Float64Array {
  const total = inputs.reduce((a, p) => a + p.w, 0);
  const out = new Float64Array(inputs[0]!.x.length);
  for (const p of inputs) p.x.forEach((v, j) => (out[j]! += (p.w / total) * v));
  return out;
}

test('CenteredClip: honest inputs give their weighted mean, identical inputs themselves, and a far outlier moves the result by a bounded amount', () => {
  const honest = around(0.5, 7, 300, 0.1);
  honest.forEach((p, k) => (p.w = k + 1));
  const plain = centeredClip(honest);
  assert.ok(maxAbsDiff(plain.average, mean(honest)) <= 1e-6, `honest inputs: ${maxAbsDiff(plain.average, mean(honest))} from the weighted mean`);
  const same = Float32Array.from({ length: 10 }, (_, j) => j);
  assert.deepEqual(centeredClip([{ w: 1, x: same }, { w: 2, x: same }]).average, same);
  // BTARD's check: 7 honest + 1 at 1e6; the plain mean would be ~1.25e5
  const equal = around(0.5, 7, 300, 0.1);
  const attacked = [...equal, { w: 1, x: new Float32Array(300).fill(1e6) }];
  const far = centeredClip(attacked);
  assert.ok(maxAbsDiff(far.average, mean(equal)) <= 1e-6, 'an input beyond τ is left out');
  assert.ok(far.spread > 0 && far.spread < 2, `spread ${far.spread} is the honest one, not the outlier's`);
  // an outlier just inside τ = 3 × spread pulls at weight 1/8 against 7/8 of honest, unclipped pull
  const near = [...equal, { w: 1, x: equal[0]!.x.map((v) => v + (2.5 * far.spread) / Math.sqrt(300)) }];
  const { average, spread } = centeredClip(near);
  const deviation = Math.sqrt(average.reduce((a, v, j) => a + (v - mean(equal)[j]!) ** 2, 0));
  assert.ok(deviation > 1e-3 && deviation <= (3 * spread) / 7, `deviation ${deviation}: in (0, τ/7 = ${(3 * spread) / 7}]`);
  // the fewest inputs where one can be told apart (3): the far one drags the mean, yet stays twice as
  // far from it as the others, so the mean is not taken as is (MEAN_FAST_PATH) and it is left out
  const two = around(0.5, 2, 300, 0.1);
  const three = centeredClip([...two, { w: 1, x: new Float32Array(300).fill(50) }]);
  assert.ok(maxAbsDiff(three.average, mean(two)) <= 1e-6, `2 honest + 1 far: ${maxAbsDiff(three.average, mean(two))} from the honest mean`);
});

test('trimmed mean drops the extremes per coordinate; a reducer with a robust aggregation holds chunks only until they are averaged', () => {
  const inputs = [1, 2, 3, 1e7].map((v) => ({ w: 1, x: Float32Array.of(v, -v) }));
  assert.deepEqual(Array.from(trimmedMean(inputs)), [2.5, -2.5]);
  assert.deepEqual(Array.from(trimmedMean(inputs.slice(0, 2))), [1.5, -1.5], 'two inputs: nothing to trim');
  for (const aggregation of ['centered-clip', 'trimmed-mean'] as const) {
    const r = new PartReducer(6, 3, new Map([['a', 1], ['b', 1], ['c', 1], ['bad', 1], ['aux', 0]]), { maxAbs: 1e8, aggregation });
    for (const [peer, v] of [['a', 1], ['b', 2], ['c', 3], ['bad', 1e7], ['aux', 1e7]] as const) for (let c = 0; c < 2; c++) r.add(peer, c, new Float32Array(3).fill(v));
    const avg = r.chunkAverage(0);
    assert.ok(avg.every((v) => v >= 1 && v <= 3 + 1e-3), `${aggregation}: ${Array.from(avg).join(', ')} stays among the honest values`);
    assert.throws(() => r.chunkAverage(0), /already averaged/);
  }
});

test("a robust reducer reuses averaged chunks' buffers for the next held chunks without mixing any sender's values", () => {
  // 3 senders, 5 chunks of 4 values (the last one short): every sender delivers chunks ahead of the
  // averages, so buffers freed by chunk i hold chunk i + 2's values while chunk i + 1's are still held
  const senders = ['a', 'b', 'c'];
  const value = (s: number, c: number, j: number): number => 10 * c + s + j / 10;
  const r = new PartReducer(18, 4, new Map(senders.map((p) => [p, 1])), { maxAbs: 1e8, aggregation: 'centered-clip' });
  const send = (c: number): void => senders.forEach((p, s) => r.add(p, c, Float32Array.from({ length: c === 4 ? 2 : 4 }, (_, j) => value(s, c, j))));
  send(0);
  send(1);
  for (let c = 0; c < 5; c++) {
    const avg = r.chunkAverage(c);
    assert.ok(maxAbsDiff(avg, Float32Array.from({ length: avg.length }, (_, j) => value(1, c, j))) < 1e-5, `chunk ${c}: ${Array.from(avg).join(', ')}`);
    if (c + 2 < 5) send(c + 2);
  }
});

test('values are checked against ±maxAbs even when maxAbs is Infinity: NaN and ±Infinity are refused', () => {
  const r = new PartReducer(2, 2, new Map([['p', 1]]), { maxAbs: Infinity });
  assert.throws(() => r.add('p', 0, Float32Array.of(0, -Infinity)), /non-finite value \(-Infinity\) at 1/);
  assert.throws(() => r.add('p', 0, Float32Array.of(Number.NaN, 0)), /non-finite value \(NaN\) at 0/);
  r.add('p', 0, Float32Array.of(3e38, -3e38));
  assert.deepEqual(Array.from(r.chunkAverage(0)), [Math.fround(3e38), Math.fround(-3e38)]);
});
