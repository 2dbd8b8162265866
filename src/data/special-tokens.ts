/** ALBERT's special tokens and their ids, as in albert-base-v2's tokenizer.json. */
export const ALBERT_SPECIALS = [
  ['<pad>', 0],
  ['<unk>', 1],
  ['[CLS]', 2],
  ['[SEP]', 3],
  ['[MASK]', 4],
] as const;

/** The ids of the tokens the pipeline needs, whatever the tokenizer calls them. */
export interface SpecialIds {
  readonly pad: number;
  readonly unk: number;
  readonly cls: number;
  readonly sep: number;
  readonly mask: number;
}

/** Names each role may have in a Hugging Face tokenizer (ALBERT/BERT first, then RoBERTa-style BPE). */
export const SPECIAL_NAMES: Readonly<Record<keyof SpecialIds, readonly string[]>> = {
  pad: ['<pad>', '[PAD]'],
  unk: ['<unk>', '[UNK]'],
  cls: ['[CLS]', '<s>'],
  sep: ['[SEP]', '</s>'],
  mask: ['[MASK]', '<mask>'],
};
