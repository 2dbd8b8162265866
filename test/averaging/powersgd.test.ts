// PowerSGD's arithmetic (issue 20's unit tests): a rank-r gradient survives compression exactly, and
// error feedback makes the running sum of what peers apply track the running sum of the true averages.
// The all-reduces are plain means here; the averager's wire is tested elsewhere.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PowerSgd, powerSgdLayout, powerSgdWireFraction, type GradientTensor } from '../../src/averaging/powersgd.js';
import { Rng } from '../../src/engine/rng.js';

const mean = (vs: readonly Float32Array[]): Float32Array => {
  const out = new Float32Array(vs[0]!.length);
  for (const v of vs) for (let i = 0; i < out.length; i++) out[i]! += v[i]! / vs.length;
  return out;
};

/** One PowerSGD round of `peers` on their own gradients; returns what each applies. */
function round(peers: readonly PowerSgd[], grads: readonly Float32Array[]): Float32Array[] {
  const p = mean(peers.map((s, i) => s.phaseP(grads[i]!)));
  const q = mean(peers.map((s, i) => s.phaseQ(p, grads[i]!)));
  return peers.map((s, i) => {
    const out = new Float32Array(grads[i]!.length);
    s.finish(q, out);
    return out;
  });
}

const norm = (v: Float32Array): number => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const diff = (a: Float32Array, b: Float32Array): Float32Array => a.map((x, i) => x - b[i]!);

// a 40×30 matrix, a 3-D tensor viewed as 20×(4·5), a bias vector and a small 2×2 matrix
const TENSORS: GradientTensor[] = [
  { offset: 0, shape: [40, 30] },
  { offset: 1200, shape: [20, 4, 5] },
  { offset: 1600, shape: [30] },
  { offset: 1630, shape: [2, 2] },
];
const SIZE = 1634;

test('layout: matrices that factorising shrinks enough are compressed, vectors and small matrices are not', () => {
  const layout = powerSgdLayout(TENSORS, 4, 0.5);
  assert.deepEqual(layout.compressed.map((c) => [c.offset, c.rows, c.cols]), [[0, 40, 30], [1200, 20, 20]]);
  assert.deepEqual(layout.plain.map((t) => [t.offset, t.length]), [[1600, 30], [1630, 4]]);
  assert.equal(layout.pLength, 4 * (40 + 20));
  assert.equal(layout.qLength, 4 * (30 + 20) + 34);
  assert.ok(powerSgdWireFraction(layout) < 0.4);
  // at rank 8 the 20×20 tensor saves 1 − 8·40/400 = 20 % < 50 %: sent as it is
  assert.deepEqual(powerSgdLayout(TENSORS, 8, 0.5).compressed.map((c) => c.offset), [0]);
  assert.throws(() => powerSgdLayout(TENSORS, 0, 0.5), /rank 0/);
  assert.throws(() => powerSgdLayout(TENSORS, 4, 1), /ratio 1/);
});

test('a gradient of rank ≤ r comes back exactly, on every peer, and leaves no error behind', () => {
  const rng = new Rng(7);
  const rank = 4;
  const layout = powerSgdLayout(TENSORS, rank, 0.5);
  const grads = [0, 1].map(() => {
    const g = new Float32Array(SIZE);
    rng.normal(g);
    // the 40×30 matrix of each peer: A·Bᵀ with inner dimension 2, so the average has rank ≤ 4
    const a = new Float32Array(40 * 2);
    const b = new Float32Array(30 * 2);
    rng.normal(a);
    rng.normal(b);
    for (let i = 0; i < 40; i++) for (let j = 0; j < 30; j++) g[i * 30 + j] = a[i * 2]! * b[j * 2]! + a[i * 2 + 1]! * b[j * 2 + 1]!;
    return g;
  });
  const peers = [new PowerSgd(layout, 1), new PowerSgd(layout, 1)];
  const applied = round(peers, grads);
  const truth = mean(grads);
  const matrix = (v: Float32Array) => v.subarray(0, 1200);
  for (const out of applied) {
    assert.ok(norm(diff(matrix(out), matrix(truth))) < 1e-4 * norm(matrix(truth)), 'the rank-4 matrix is reproduced');
    assert.deepEqual(out.subarray(1600), truth.subarray(1600), 'uncompressed tensors are the plain average');
  }
  assert.deepEqual(applied[0], applied[1], 'every peer applies the same gradient');
  assert.ok(norm(mean(peers.map((s) => s.errors)).subarray(0, 1200)) < 1e-4 * norm(matrix(truth)), 'nothing is owed: each error buffer holds only its peer’s difference from the average');
});

test('error feedback: the running sum of applied gradients tracks the running sum of true averages', () => {
  const rng = new Rng(3);
  const layout = powerSgdLayout(TENSORS, 1, 0);
  const peers = [0, 1, 2].map(() => new PowerSgd(layout, 5));
  const appliedSum = new Float32Array(SIZE);
  const trueSum = new Float32Array(SIZE);
  const gaps: number[] = [];
  for (let t = 0; t < 60; t++) {
    const grads = peers.map(() => {
      const g = new Float32Array(SIZE);
      rng.normal(g, 0.1, 1); // full rank, with a persistent direction
      return g;
    });
    const applied = round(peers, grads)[0]!;
    for (let i = 0; i < SIZE; i++) {
      appliedSum[i]! += applied[i]!;
      trueSum[i]! += mean(grads)[i]!;
    }
    // what is still owed is exactly the peers' mean error buffer
    const owed = mean(peers.map((s) => s.errors));
    const compressedGap = diff(trueSum, appliedSum).subarray(0, 1200);
    assert.ok(norm(diff(compressedGap, owed.subarray(0, 1200))) < 1e-3 * norm(compressedGap) + 1e-3, `round ${t}: sum gap = mean error buffer`);
    gaps.push(norm(compressedGap) / norm(trueSum.subarray(0, 1200)));
  }
  // rank 1 sends ~6 % of the 40×30 matrix; what is owed stays bounded while the sums grow, so the relative gap shrinks
  // (without error feedback it would stay at the share of each gradient that rank 1 cannot carry)
  assert.ok(gaps[59]! < 0.5 * gaps[9]!, `relative gap of the running sums: ${gaps[9]!.toFixed(3)} after 10 rounds, ${gaps[59]!.toFixed(3)} after 60`);

});
