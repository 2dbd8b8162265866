import assert from 'node:assert/strict';
import test from 'node:test';
import { buildBatch, MASKING_MODES, type RowSource, type VocabInfo } from '../../src/data/masking.js';
import { Prng } from '../../src/data/prng.js';
import { labelledPositions, mlmCapacity } from '../../src/engine/albert/mlm-positions.js';
import { IGNORE_INDEX } from '../../src/engine/batch.js';
import { Rng } from '../../src/engine/rng.js';
import { syntheticBatch } from '../../src/engine/synthetic.js';

const labelledCount = (labels: Int32Array) => labels.reduce((n, l) => n + (l === IGNORE_INDEX ? 0 : 1), 0);

test('labelledPositions: ascending flat positions with their labels, padded with position 0 and label −100', () => {
  const labels = Int32Array.from([-100, 13, -100, 7, -100, -100, 21, -100]);
  const picked = labelledPositions(labels, 5);
  assert.ok('positions' in picked);
  assert.deepEqual([...picked.positions], [1n, 3n, 6n, 0n, 0n]);
  assert.deepEqual([...picked.labels], [13, 7, 21, IGNORE_INDEX, IGNORE_INDEX]);
  const exact = labelledPositions(labels, 3);
  assert.ok('positions' in exact);
  assert.deepEqual([...exact.labels], [13, 7, 21]);
});

test('labelledPositions: more labelled positions than slots is reported with the count, never truncated', () => {
  assert.deepEqual(labelledPositions(Int32Array.from([5, 6, -100, 7]), 2), { overflow: 3 });
});

test('mlmCapacity: well below B·S at the default rate, capped at B·S, bad rates rejected', () => {
  const k = mlmCapacity(8, 128);
  assert.ok(k < 0.25 * 8 * 128, `K = ${k} should cut the head's rows to under a quarter`);
  assert.ok(k > 0.15 * 8 * 128, `K = ${k} must exceed the expected count`);
  assert.equal(mlmCapacity(2, 5), 10);
  assert.equal(mlmCapacity(8, 128, 1), 8 * 128);
  assert.throws(() => mlmCapacity(8, 128, 1.5), /mlm probability 1.5/);
  assert.throws(() => mlmCapacity(8, 128, Number.NaN), /mlm probability NaN/);
});

// The bound is a tail bound for token masking and a hard bound for word-level masking: batches from
// the data pipeline (every mode, full rows so the most tokens are candidates) and synthetic ones fit.
test('batches from the data pipeline (token, whole-word, n-gram) and synthetic batches fit in K at 8×128', () => {
  const [B, S] = [8, 128];
  const K = mlmCapacity(B, S);
  const V = 1000;
  const isSpecial = new Uint8Array(V).fill(1, 0, 5);
  const vocab: VocabInfo = { vocabSize: V, special: { pad: 0, unk: 1, cls: 2, sep: 3, mask: 4 }, isSpecial, wordStart: Uint8Array.from({ length: V }, (_, id) => (id % 3 === 0 ? 1 : 0)) };
  const rng = new Prng(3);
  let most = 0;
  for (const mode of MASKING_MODES) {
    for (let i = 0; i < 100; i++) {
      const rows: RowSource[] = Array.from({ length: B }, () => ({ ids: Array.from({ length: S }, () => rng.int(5, V - 1)), aStart: 0, aLen: 60, bStart: 60, bLen: 68, sop: 0 }));
      most = Math.max(most, labelledCount(buildBatch(rows, S, vocab, rng, { mode }).labels));
    }
  }
  const synthetic = new Rng(4);
  for (let i = 0; i < 100; i++) most = Math.max(most, labelledCount(syntheticBatch({ vocabSize: V }, B, S, synthetic).labels));
  assert.ok(most <= K, `a batch had ${most} labelled positions, K = ${K}`);
  assert.ok(most > 0.15 * B * S, `the largest count ${most} should exceed the mean, else the check is too easy`);
});
