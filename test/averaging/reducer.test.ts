import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chunkRange, partRanges, partSizes } from '../../src/averaging/load-balancing.js';
import { PartReducer, PeerFault } from '../../src/averaging/reducer.js';

test('parts are proportional to bandwidth, integral, complete, and client-mode peers get none', () => {
  const sizes = partSizes(1000, [
    { peerId: 'a', bandwidth: 100, clientMode: false },
    { peerId: 'b', bandwidth: 300, clientMode: false },
    { peerId: 'c', bandwidth: 1e9, clientMode: true },
    { peerId: 'd', bandwidth: 200, clientMode: false },
  ]);
  assert.deepEqual(sizes, [167, 500, 0, 333]);
  assert.deepEqual(partRanges(sizes), [[0, 167], [167, 667], [667, 667], [667, 1000]]);
  assert.equal(partSizes(7, [{ peerId: 'a', bandwidth: 1, clientMode: false }, { peerId: 'b', bandwidth: 1, clientMode: false }, { peerId: 'c', bandwidth: 1, clientMode: false }]).reduce((x, y) => x + y), 7);
  assert.throws(() => partSizes(10, [{ peerId: 'c', bandwidth: 5, clientMode: true }]), /no peer can reduce/);
  assert.throws(() => partSizes(-1, []), /non-negative integer/);
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
