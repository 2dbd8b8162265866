import type { Prng } from './prng.js';

/** One sentence-order-prediction example before special tokens: segment A, segment B and the label. */
export interface SopExample {
  readonly a: readonly number[];
  readonly b: readonly number[];
  /** 0 = A precedes B in the text, 1 = swapped (HF `sentence_order_label`). */
  readonly sop: 0 | 1;
}

export interface ExampleParams {
  /** Total length including [CLS] and two [SEP]. @default 128 (512 for the large preset) */
  readonly maxSeqLen: number;
  /** Probability of aiming at a shorter sequence, so the model also sees short inputs. @default 0.1 */
  readonly shortSeqProb: number;
}

/**
 * Builds SOP examples from one document's tokenized sentences, as ALBERT's create_pretraining_data
 * and hivemind's tokenize_wikitext103 do: sentences are gathered until the target length, split at a
 * random sentence boundary into A and B, swapped with probability 1/2 (label 1), and the pair is
 * truncated to fit. A chunk of a single sentence has no order to predict and is dropped.
 * The target length is drawn per chunk (not per document) because our documents are whole articles.
 */
export function createExamples(sentences: readonly (readonly number[])[], params: ExampleParams, rng: Prng): SopExample[] {
  const maxTokens = params.maxSeqLen - 3;
  const drawTarget = () => (rng.next() < params.shortSeqProb ? rng.int(2, maxTokens) : maxTokens);
  const out: SopExample[] = [];
  let target = drawTarget();
  let chunk: (readonly number[])[] = [];
  let length = 0;
  for (let i = 0; i < sentences.length; i++) {
    const s = sentences[i]!;
    if (s.length === 0) continue;
    chunk.push(s);
    length += s.length;
    if (i === sentences.length - 1 || length >= target) {
      if (chunk.length >= 2) {
        const aEnd = rng.int(1, chunk.length - 1);
        let a = chunk.slice(0, aEnd).flat();
        let b = chunk.slice(aEnd).flat();
        let sop: 0 | 1 = 0;
        if (rng.next() < 0.5) {
          [a, b] = [b, a];
          sop = 1;
        }
        truncatePair(a, b, maxTokens, rng);
        out.push({ a, b, sop });
      }
      chunk = [];
      length = 0;
      target = drawTarget();
    }
  }
  return out;
}

/** Trims the longer segment, from the front or back at random (ALBERT's truncate_seq_pair), until both fit. */
function truncatePair(a: number[], b: number[], maxTokens: number, rng: Prng): void {
  while (a.length + b.length > maxTokens) {
    const longer = a.length > b.length ? a : b;
    if (rng.next() < 0.5) longer.shift();
    else longer.pop();
  }
}
