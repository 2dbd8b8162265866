import { IGNORE_INDEX, type AlbertBatch } from '../engine/batch.js';
import type { Prng } from './prng.js';
import type { SpecialIds } from './special-tokens.js';

export type MaskingMode = 'token' | 'whole-word' | 'ngram';
export const MASKING_MODES: readonly MaskingMode[] = ['token', 'whole-word', 'ngram'];

/** What masking needs to know about the vocabulary (plain arrays, so it can cross to a worker thread). */
export interface VocabInfo {
  readonly vocabSize: number;
  readonly special: SpecialIds;
  readonly isSpecial: Uint8Array;
  readonly wordStart: Uint8Array;
}

export interface MaskingOptions {
  /** Share of (non-special) tokens predicted. @default 0.15 */
  readonly mlmProbability?: number;
  /** token: each token independently (HF DataCollatorForLanguageModeling, as hivemind); whole-word; ngram: ALBERT's n-gram spans. @default token */
  readonly mode?: MaskingMode;
  /** Longest n-gram for `ngram` mode, drawn with probability ∝ 1/n. @default 3 */
  readonly maxNgram?: number;
}

/** A pair of segments to lay out as one row: `ids[aStart..aStart+aLen)` then `ids[bStart..bStart+bLen)`. */
export interface RowSource {
  readonly ids: ArrayLike<number>;
  readonly aStart: number;
  readonly aLen: number;
  readonly bStart: number;
  readonly bLen: number;
  readonly sop: number;
}

/**
 * Lays rows out as `[CLS] A [SEP] B [SEP] <pad>…` (token_type 0 through the first [SEP], 1 after) and
 * masks them dynamically: the selected tokens get their id as label and are replaced 80 % by [MASK],
 * 10 % by a random non-special token and 10 % kept. Special tokens and padding are never selected.
 * Rows longer than `seqLen` are cut longest-segment-first from the end.
 */
export function buildBatch(rows: readonly RowSource[], seqLen: number, vocab: VocabInfo, rng: Prng, options: MaskingOptions = {}): AlbertBatch {
  if (seqLen < 5) throw new RangeError(`seqLen ${seqLen}: need at least 5 ([CLS] a [SEP] b [SEP])`);
  const batchSize = rows.length;
  const inputIds = new Int32Array(batchSize * seqLen).fill(vocab.special.pad);
  const tokenTypeIds = new Int32Array(batchSize * seqLen);
  const attentionMask = new Int32Array(batchSize * seqLen);
  const labels = new Int32Array(batchSize * seqLen).fill(IGNORE_INDEX);
  const sentenceOrderLabel = new Int32Array(batchSize);
  const p = options.mlmProbability ?? 0.15;
  const mode = options.mode ?? 'token';
  for (let r = 0; r < batchSize; r++) {
    const row = rows[r]!;
    let aLen = row.aLen;
    let bLen = row.bLen;
    while (aLen + bLen > seqLen - 3) {
      if (aLen > bLen) aLen--;
      else bLen--;
    }
    const o = r * seqLen;
    let k = o;
    inputIds[k++] = vocab.special.cls;
    for (let i = 0; i < aLen; i++) inputIds[k++] = row.ids[row.aStart + i]!;
    inputIds[k++] = vocab.special.sep;
    const bFrom = k;
    for (let i = 0; i < bLen; i++) inputIds[k++] = row.ids[row.bStart + i]!;
    inputIds[k++] = vocab.special.sep;
    tokenTypeIds.fill(1, bFrom, k);
    attentionMask.fill(1, o, k);
    sentenceOrderLabel[r] = row.sop;
    const selected = mode === 'token' ? selectTokens(inputIds, o, k, vocab, p, rng) : selectWords(inputIds, o, k, vocab, p, rng, mode === 'ngram' ? (options.maxNgram ?? 3) : 1);
    for (const pos of selected) {
      labels[pos] = inputIds[pos]!;
      const u = rng.next();
      if (u < 0.8) inputIds[pos] = vocab.special.mask;
      else if (u < 0.9) inputIds[pos] = randomToken(vocab, rng);
    }
  }
  return { batchSize, seqLen, inputIds, tokenTypeIds, attentionMask, labels, sentenceOrderLabel };
}

function selectTokens(ids: Int32Array, from: number, to: number, vocab: VocabInfo, p: number, rng: Prng): number[] {
  const out: number[] = [];
  for (let i = from; i < to; i++) if (vocab.isSpecial[ids[i]!] !== 1 && rng.next() < p) out.push(i);
  return out;
}

/**
 * Whole-word (maxN = 1) and n-gram masking: words are a word-start token plus its continuation pieces;
 * candidate starts are visited in random order and a span of n words (P(n) ∝ 1/n) is taken while the
 * budget of round(p · tokens) is not exceeded, as in ALBERT's create_masked_lm_predictions.
 */
function selectWords(ids: Int32Array, from: number, to: number, vocab: VocabInfo, p: number, rng: Prng, maxN: number): number[] {
  const words: [number, number][] = [];
  let tokens = 0;
  for (let i = from; i < to; i++) {
    const id = ids[i]!;
    if (vocab.isSpecial[id] === 1) continue;
    tokens++;
    const last = words[words.length - 1];
    if (last && last[1] === i && vocab.wordStart[id] !== 1) last[1] = i + 1;
    else words.push([i, i + 1]);
  }
  const budget = Math.max(1, Math.round(tokens * p));
  const weights = Array.from({ length: maxN }, (_, n) => 1 / (n + 1));
  const total = weights.reduce((s, w) => s + w, 0);
  const taken = new Uint8Array(words.length);
  const out: number[] = [];
  for (const w of rng.permutation(words.length)) {
    if (out.length >= budget) break;
    let u = rng.next() * total;
    let n = 1;
    while (n < maxN && u >= weights[n - 1]!) u -= weights[n++ - 1]!;
    n = Math.min(n, words.length - w);
    let span = 0;
    let free = true;
    for (let j = w; j < w + n; j++) {
      if (taken[j]) free = false;
      span += words[j]![1] - words[j]![0];
    }
    if (!free || out.length + span > budget) continue;
    for (let j = w; j < w + n; j++) {
      taken[j] = 1;
      for (let i = words[j]![0]; i < words[j]![1]; i++) out.push(i);
    }
  }
  return out;
}

function randomToken(vocab: VocabInfo, rng: Prng): number {
  // Bounded retry: the specials are a handful of ids, so a draw almost always lands on a normal token.
  for (let tries = 0; tries < 64; tries++) {
    const id = rng.int(0, vocab.vocabSize - 1);
    if (vocab.isSpecial[id] !== 1) return id;
  }
  return vocab.special.unk;
}
