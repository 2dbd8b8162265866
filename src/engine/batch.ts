import { z } from 'zod';

/**
 * One ALBERT pretraining batch: the contract between the data pipeline (which produces it) and the
 * engine (which consumes it). Row-major [batchSize, seqLen] arrays; names follow Hugging Face's
 * `AlbertForPreTraining` arguments.
 */
export interface AlbertBatch {
  readonly batchSize: number;
  readonly seqLen: number;
  /** [B, S] token ids. */
  readonly inputIds: Int32Array;
  /** [B, S] 0 for the first segment, 1 for the second. */
  readonly tokenTypeIds: Int32Array;
  /** [B, S] 1 for real tokens, 0 for padding. */
  readonly attentionMask: Int32Array;
  /** [B, S] masked-LM targets; IGNORE_INDEX (-100) where no prediction is made. */
  readonly labels: Int32Array;
  /** [B] 0 = segments in original order, 1 = swapped (HF convention). */
  readonly sentenceOrderLabel: Int32Array;
}

export const IGNORE_INDEX = -100;

const matrix = z.array(z.array(z.number().int()).min(1)).min(1);

/** The JSON form: HF argument names, nested integer arrays (what `cohort model loss --batch` reads). */
const batchJsonSchema = z.object({
  input_ids: matrix,
  token_type_ids: matrix.optional(),
  attention_mask: matrix.optional(),
  labels: matrix,
  sentence_order_label: z.array(z.number().int().min(0).max(1)).min(1),
});
export type BatchJson = z.infer<typeof batchJsonSchema>;

/** Validates a JSON batch (all rows the same length, shapes agreeing) and converts it; missing masks default as HF does. */
export function batchFromJson(value: unknown, vocabSize?: number): AlbertBatch {
  const parsed = batchJsonSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`batch: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  const json = parsed.data;
  const batchSize = json.input_ids.length;
  const seqLen = json.input_ids[0]!.length;
  const flat = (name: string, rows: number[][] | undefined, fill: number) => {
    if (rows === undefined) return new Int32Array(batchSize * seqLen).fill(fill);
    if (rows.length !== batchSize || rows.some((r) => r.length !== seqLen)) throw new Error(`batch: ${name} must be ${batchSize} rows of ${seqLen} like input_ids`);
    return Int32Array.from(rows.flat());
  };
  const batch: AlbertBatch = {
    batchSize,
    seqLen,
    inputIds: flat('input_ids', json.input_ids, 0),
    tokenTypeIds: flat('token_type_ids', json.token_type_ids, 0),
    attentionMask: flat('attention_mask', json.attention_mask, 1),
    labels: flat('labels', json.labels, IGNORE_INDEX),
    sentenceOrderLabel: Int32Array.from(json.sentence_order_label),
  };
  if (batch.sentenceOrderLabel.length !== batchSize) throw new Error(`batch: sentence_order_label has ${batch.sentenceOrderLabel.length} entries for ${batchSize} rows`);
  checkBatch(batch, vocabSize);
  return batch;
}

export function batchToJson(batch: AlbertBatch): BatchJson {
  const rows = (a: Int32Array) => Array.from({ length: batch.batchSize }, (_, i) => Array.from(a.subarray(i * batch.seqLen, (i + 1) * batch.seqLen)));
  return {
    input_ids: rows(batch.inputIds),
    token_type_ids: rows(batch.tokenTypeIds),
    attention_mask: rows(batch.attentionMask),
    labels: rows(batch.labels),
    sentence_order_label: Array.from(batch.sentenceOrderLabel),
  };
}

/** Checks ranges the model relies on: ids within the vocabulary, binary masks, labels valid or ignored. */
export function checkBatch(batch: AlbertBatch, vocabSize?: number): void {
  const n = batch.batchSize * batch.seqLen;
  for (const [name, a] of [['input_ids', batch.inputIds], ['token_type_ids', batch.tokenTypeIds], ['attention_mask', batch.attentionMask], ['labels', batch.labels]] as const) {
    if (a.length !== n) throw new Error(`batch: ${name} has ${a.length} elements, expected ${batch.batchSize}×${batch.seqLen}`);
  }
  const inVocab = (id: number) => id >= 0 && (vocabSize === undefined || id < vocabSize);
  for (let i = 0; i < n; i++) {
    if (!inVocab(batch.inputIds[i]!)) throw new Error(`batch: input_ids[${Math.floor(i / batch.seqLen)}][${i % batch.seqLen}] = ${batch.inputIds[i]} is outside the vocabulary (${vocabSize})`);
    if (batch.tokenTypeIds[i]! !== 0 && batch.tokenTypeIds[i]! !== 1) throw new Error(`batch: token_type_ids must be 0 or 1, found ${batch.tokenTypeIds[i]}`);
    if (batch.attentionMask[i]! !== 0 && batch.attentionMask[i]! !== 1) throw new Error(`batch: attention_mask must be 0 or 1, found ${batch.attentionMask[i]}`);
    const label = batch.labels[i]!;
    if (label !== IGNORE_INDEX && !inVocab(label)) throw new Error(`batch: labels[${Math.floor(i / batch.seqLen)}][${i % batch.seqLen}] = ${label} is neither ${IGNORE_INDEX} nor a token id`);
  }
  for (const l of batch.sentenceOrderLabel) if (l !== 0 && l !== 1) throw new Error(`batch: sentence_order_label must be 0 or 1, found ${l}`);
}
