import assert from 'node:assert/strict';
import test from 'node:test';
import { IGNORE_INDEX, checkBatch } from '../../src/engine/batch.js';
import { buildBatch, type RowSource, type VocabInfo } from '../../src/data/masking.js';
import { Prng } from '../../src/data/prng.js';

const V = 1000;
const special = { pad: 0, unk: 1, cls: 2, sep: 3, mask: 4 };
const isSpecial = new Uint8Array(V).fill(0, 5);
isSpecial.fill(1, 0, 5);
// Words of three pieces: ids ≡ 0 (mod 3) start a word.
const wordStart = Uint8Array.from({ length: V }, (_, id) => (id < 5 || id % 3 === 0 ? 1 : 0));
const vocab: VocabInfo = { vocabSize: V, special, isSpecial, wordStart };

function rows(n: number, rng: Prng): RowSource[] {
  return Array.from({ length: n }, () => {
    const aLen = rng.int(10, 60);
    const bLen = rng.int(10, 60);
    // Whole words of 3 pieces: 300+3w, 301+3w, 302+3w.
    const ids = Array.from({ length: aLen + bLen }, (_, i) => 300 + 3 * Math.floor(i / 3) + (i % 3));
    return { ids, aStart: 0, aLen, bStart: aLen, bLen, sop: rng.int(0, 1) };
  });
}

test('layout: [CLS] A [SEP] B [SEP] then padding, token types and attention mask, SOP labels copied', () => {
  const r: RowSource = { ids: [10, 11, 12, 20, 21], aStart: 0, aLen: 3, bStart: 3, bLen: 2, sop: 1 };
  const b = buildBatch([r], 12, vocab, new Prng(1), { mlmProbability: 0 });
  assert.deepEqual([...b.inputIds], [2, 10, 11, 12, 3, 20, 21, 3, 0, 0, 0, 0]);
  assert.deepEqual([...b.tokenTypeIds], [0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0]);
  assert.deepEqual([...b.attentionMask], [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0]);
  assert.deepEqual([...b.labels], new Array(12).fill(IGNORE_INDEX));
  assert.deepEqual([...b.sentenceOrderLabel], [1]);
  // Too long for the row: the longer segment is cut first.
  const cut = buildBatch([r], 7, vocab, new Prng(1), { mlmProbability: 0 });
  assert.deepEqual([...cut.inputIds], [2, 10, 11, 3, 20, 21, 3]);
});

test('token masking: 15 % of non-special tokens predicted, split 80 % [MASK] / 10 % random / 10 % kept; specials and padding never', () => {
  const rng = new Prng(11);
  const input = rows(2000, rng);
  const b = buildBatch(input, 128, vocab, rng);
  checkBatch(b, V);
  let real = 0;
  let predicted = 0;
  let masked = 0;
  let kept = 0;
  let random = 0;
  for (let i = 0; i < b.inputIds.length; i++) {
    const label = b.labels[i]!;
    if (b.attentionMask[i] === 1 && b.tokenTypeIds[i] !== undefined) real++;
    if (label === IGNORE_INDEX) continue;
    predicted++;
    assert.equal(isSpecial[label], 0, 'a special token was selected for prediction');
    assert.equal(b.attentionMask[i], 1, 'padding was selected for prediction');
    if (b.inputIds[i] === special.mask) masked++;
    else if (b.inputIds[i] === label) kept++;
    else {
      random++;
      assert.equal(isSpecial[b.inputIds[i]!], 0, 'a random replacement must not be a special token');
    }
  }
  const nonSpecial = real - 3 * input.length;
  const ratio = predicted / nonSpecial;
  assert.ok(Math.abs(ratio - 0.15) < 0.01, `predicted ratio ${ratio}`);
  assert.ok(Math.abs(masked / predicted - 0.8) < 0.02, `[MASK] share ${masked / predicted}`);
  assert.ok(Math.abs(random / predicted - 0.1) < 0.02, `random share ${random / predicted}`);
  assert.ok(Math.abs(kept / predicted - 0.1) < 0.02, `kept share ${kept / predicted}`);
});

test('whole-word and n-gram masking predict whole words only, about 15 % of tokens', () => {
  for (const mode of ['whole-word', 'ngram'] as const) {
    const rng = new Prng(5);
    const input = rows(1000, rng);
    const b = buildBatch(input, 128, vocab, rng, { mode });
    let predicted = 0;
    let tokens = 0;
    for (let r = 0; r < b.batchSize; r++) {
      for (let i = r * 128; i < (r + 1) * 128; i++) {
        const original = b.labels[i] !== IGNORE_INDEX ? b.labels[i]! : b.inputIds[i]!;
        if (b.attentionMask[i] === 1 && isSpecial[original] === 0) tokens++;
        if (b.labels[i] === IGNORE_INDEX) continue;
        predicted++;
        // Every piece of a selected word is selected: neighbours within the same word are labelled too.
        const label = b.labels[i]!;
        if (wordStart[label] === 0 && isSpecial[b.labels[i - 1]!] === 0) assert.notEqual(b.labels[i - 1], IGNORE_INDEX, `${mode}: continuation piece selected without its word start`);
      }
    }
    const ratio = predicted / tokens;
    assert.ok(Math.abs(ratio - 0.15) < 0.02, `${mode}: predicted ratio ${ratio}`);
  }
});

test('masking is deterministic for a seed', () => {
  const input = rows(16, new Prng(2));
  const a = buildBatch(input, 128, vocab, new Prng('s'));
  assert.deepEqual(a, buildBatch(input, 128, vocab, new Prng('s')));
  assert.notDeepEqual(a.labels, buildBatch(input, 128, vocab, new Prng('t')).labels);
});
