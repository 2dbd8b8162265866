import { DataError } from './errors.js';
import { ALBERT_SPECIALS } from './special-tokens.js';

/** Lower-case, accents stripped, split into words and single punctuation marks (as BertNormalizer + BertPreTokenizer do). */
function preTokenize(text: string): string[] {
  const normalized = text.toLowerCase().normalize('NFD').replace(/\p{Mn}/gu, '');
  return normalized.match(/[\p{L}\p{N}]+|[^\s\p{L}\p{N}]/gu) ?? [];
}

export interface WordPieceTrainOptions {
  readonly vocabSize: number;
  /** Characters seen fewer times than this are left out of the alphabet (they become <unk>). @default 2 */
  readonly minCharFrequency?: number;
}

/** Counts words for training; call `add` per text, then `train`. */
export class WordCounter {
  readonly counts = new Map<string, number>();
  add(text: string): void {
    for (const w of preTokenize(text)) this.counts.set(w, (this.counts.get(w) ?? 0) + 1);
  }
}

const PREFIX = '##';

/**
 * Trains a WordPiece vocabulary the way Hugging Face's WordPieceTrainer does (BPE-style merges of the
 * most frequent adjacent pair, continuation pieces marked "##") and returns a complete tokenizer.json
 * object with ALBERT's special tokens at ids 0–4. Pair counts are updated incrementally and the best
 * pair comes from a lazy max-heap, so a 10 MB corpus trains in seconds.
 */
export function trainWordPiece(counts: ReadonlyMap<string, number>, options: WordPieceTrainOptions): object {
  const minChar = options.minCharFrequency ?? 2;
  const charCounts = new Map<string, number>();
  for (const [w, c] of counts) for (const ch of w) charCounts.set(ch, (charCounts.get(ch) ?? 0) + c);
  const alphabet = [...charCounts].filter(([, c]) => c >= minChar).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([ch]) => ch);

  const symbols: string[] = ALBERT_SPECIALS.map(([t]) => t);
  const symbolId = new Map<string, number>(symbols.map((s, i) => [s, i]));
  const intern = (s: string) => {
    let id = symbolId.get(s);
    if (id === undefined) {
      id = symbols.length;
      symbols.push(s);
      symbolId.set(s, id);
    }
    return id;
  };
  for (const ch of alphabet) intern(ch);
  for (const ch of alphabet) intern(PREFIX + ch);
  if (symbols.length > options.vocabSize) throw new DataError(`--vocab-size ${options.vocabSize} is smaller than the alphabet of the corpus (${symbols.length} symbols incl. specials); use a larger vocabulary`);

  // Words as symbol sequences; words with a character outside the alphabet cannot be merged (they map to <unk>).
  const words: number[][] = [];
  const freqs: number[] = [];
  for (const [w, c] of counts) {
    const chars = [...w];
    if (chars.length < 2 || chars.some((ch) => !symbolId.has(ch))) continue;
    words.push(chars.map((ch, i) => symbolId.get(i === 0 ? ch : PREFIX + ch)!));
    freqs.push(c);
  }

  const pairCount = new Map<number, number>();
  const pairWords = new Map<number, Set<number>>();
  const key = (a: number, b: number) => a * 2 ** 21 + b;
  const heap = new PairHeap();
  const bump = (k: number, delta: number, word: number) => {
    const n = (pairCount.get(k) ?? 0) + delta;
    pairCount.set(k, n);
    if (delta > 0) {
      let set = pairWords.get(k);
      if (!set) pairWords.set(k, (set = new Set()));
      set.add(word);
    }
    heap.push(n, k);
  };
  for (let w = 0; w < words.length; w++) {
    const s = words[w]!;
    for (let i = 0; i + 1 < s.length; i++) bump(key(s[i]!, s[i + 1]!), freqs[w]!, w);
  }

  while (symbols.length < options.vocabSize) {
    const best = heap.popValid(pairCount);
    if (best === undefined) break;
    const a = Math.floor(best / 2 ** 21);
    const b = best % 2 ** 21;
    const merged = intern(symbols[a]! + symbols[b]!.slice(symbols[b]!.startsWith(PREFIX) ? PREFIX.length : 0));
    for (const w of pairWords.get(best) ?? []) {
      const s = words[w]!;
      const f = freqs[w]!;
      for (let i = 0; i + 1 < s.length; i++) bump(key(s[i]!, s[i + 1]!), -f, w);
      const out: number[] = [];
      for (let i = 0; i < s.length; i++) {
        if (i + 1 < s.length && s[i] === a && s[i + 1] === b) {
          out.push(merged);
          i++;
        } else out.push(s[i]!);
      }
      words[w] = out;
      for (let i = 0; i + 1 < out.length; i++) bump(key(out[i]!, out[i + 1]!), f, w);
    }
    pairWords.delete(best);
    pairCount.delete(best);
  }
  return wordPieceTokenizerJson(symbols);
}

/** A Hugging Face tokenizer.json for a WordPiece vocabulary whose first five entries are ALBERT's specials. */
export function wordPieceTokenizerJson(vocab: readonly string[]): object {
  const special = (id: number, content: string) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  const tok = (name: string, typeId: number) => ({ SpecialToken: { id: name, type_id: typeId } });
  const seq = (name: 'A' | 'B', typeId: number) => ({ Sequence: { id: name, type_id: typeId } });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: ALBERT_SPECIALS.map(([t, id]) => special(id, t)),
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [tok('[CLS]', 0), seq('A', 0), tok('[SEP]', 0)],
      pair: [tok('[CLS]', 0), seq('A', 0), tok('[SEP]', 0), seq('B', 1), tok('[SEP]', 1)],
      special_tokens: Object.fromEntries(['[CLS]', '[SEP]'].map((t) => [t, { id: t, ids: [vocab.indexOf(t)], tokens: [t] }])),
    },
    decoder: { type: 'WordPiece', prefix: PREFIX, cleanup: true },
    model: { type: 'WordPiece', unk_token: '<unk>', continuing_subword_prefix: PREFIX, max_input_chars_per_word: 100, vocab: Object.fromEntries(vocab.map((t, i) => [t, i])) },
  };
}

/** Max-heap of (count, pair) with lazy deletion: entries whose count is stale are dropped when popped. Ties go to the smaller pair key. */
class PairHeap {
  private counts: number[] = [];
  private keys: number[] = [];

  push(count: number, k: number): void {
    if (count <= 0) return;
    this.counts.push(count);
    this.keys.push(k);
    let i = this.counts.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.above(i, p)) break;
      this.swap(i, p);
      i = p;
    }
  }

  popValid(current: ReadonlyMap<number, number>): number | undefined {
    while (this.counts.length > 0) {
      const count = this.counts[0]!;
      const k = this.keys[0]!;
      this.removeTop();
      if (current.get(k) === count) return k;
    }
    return undefined;
  }

  private removeTop(): void {
    const lastC = this.counts.pop()!;
    const lastK = this.keys.pop()!;
    if (this.counts.length === 0) return;
    this.counts[0] = lastC;
    this.keys[0] = lastK;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < this.counts.length && this.above(l, m)) m = l;
      if (r < this.counts.length && this.above(r, m)) m = r;
      if (m === i) return;
      this.swap(i, m);
      i = m;
    }
  }

  private above(i: number, j: number): boolean {
    return this.counts[i]! > this.counts[j]! || (this.counts[i] === this.counts[j] && this.keys[i]! < this.keys[j]!);
  }

  private swap(i: number, j: number): void {
    [this.counts[i], this.counts[j]] = [this.counts[j]!, this.counts[i]!];
    [this.keys[i], this.keys[j]] = [this.keys[j]!, this.keys[i]!];
  }
}
