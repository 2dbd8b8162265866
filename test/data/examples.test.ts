import assert from 'node:assert/strict';
import test from 'node:test';
import { createExamples } from '../../src/data/examples.js';
import { Prng } from '../../src/data/prng.js';

/** Sentences whose token ids encode their position: sentence s has ids 1000·(s+1) + k, so order is checkable. */
function document(count: number, lengthOf: (s: number) => number): number[][] {
  return Array.from({ length: count }, (_, s) => Array.from({ length: lengthOf(s) }, (_, k) => 1000 * (s + 1) + k));
}
const sentenceOf = (id: number) => Math.floor(id / 1000) - 1;

test('SOP pairs: both orders occur about equally, labels match the order, segments are contiguous runs of sentences', () => {
  const rng = new Prng(7);
  const doc = document(4000, (s) => 5 + (s % 17));
  const examples = createExamples(doc, { maxSeqLen: 128, shortSeqProb: 0.1 }, rng);
  assert.ok(examples.length > 300);
  let swapped = 0;
  for (const e of examples) {
    assert.ok(e.a.length >= 1 && e.b.length >= 1);
    assert.ok(e.a.length + e.b.length <= 125, 'pair fits max_seq_length − 3');
    const lastA = sentenceOf(e.a[e.a.length - 1]!);
    const firstB = sentenceOf(e.b[0]!);
    // Original order: A's sentences come right before B's; swapped: B's come before A's.
    if (e.sop === 0) assert.ok(lastA < firstB, `label 0 but A (…${lastA}) does not precede B (${firstB}…)`);
    else {
      swapped++;
      assert.ok(sentenceOf(e.b[e.b.length - 1]!) < sentenceOf(e.a[0]!), 'label 1 means B precedes A in the text');
    }
  }
  const share = swapped / examples.length;
  assert.ok(share > 0.42 && share < 0.58, `swapped share ${share}`);
});

test('short sequences: with probability 0.1 a chunk aims at a length drawn from 2..max', () => {
  const doc = document(20000, () => 8);
  const long = createExamples(doc, { maxSeqLen: 128, shortSeqProb: 0 }, new Prng(1));
  const mixed = createExamples(doc, { maxSeqLen: 128, shortSeqProb: 0.1 }, new Prng(1));
  const short = (es: typeof long) => es.filter((e) => e.a.length + e.b.length < 100).length / es.length;
  assert.ok(short(long) < 0.02, `no short targets requested, got ${short(long)}`);
  // Targets are uniform in 2..125, so about 0.1 · 98/124 ≈ 8 % of chunks end below 100 tokens.
  assert.ok(short(mixed) > 0.05 && short(mixed) < 0.11, `short share ${short(mixed)}`);
});

test('a chunk of one long sentence gives no example; an over-long pair is truncated to fit', () => {
  assert.deepEqual(createExamples([Array.from({ length: 300 }, (_, i) => i + 5)], { maxSeqLen: 64, shortSeqProb: 0 }, new Prng(1)), []);
  const examples = createExamples(document(2, () => 40), { maxSeqLen: 64, shortSeqProb: 0 }, new Prng(1));
  assert.equal(examples.length, 1);
  assert.equal(examples[0]!.a.length + examples[0]!.b.length, 61);
});

test('examples are deterministic for a seed and differ between seeds', () => {
  const doc = document(500, (s) => 3 + (s % 11));
  const params = { maxSeqLen: 128, shortSeqProb: 0.1 };
  assert.deepEqual(createExamples(doc, params, new Prng(3)), createExamples(doc, params, new Prng(3)));
  assert.notDeepEqual(createExamples(doc, params, new Prng(3)), createExamples(doc, params, new Prng(4)));
});
