import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { threadId } from 'node:worker_threads';
import { Tokenizer as UntypedTokenizer } from '@huggingface/tokenizers';
import { TokenizerFileError } from './errors.js';
import { SPECIAL_NAMES, type SpecialIds } from './special-tokens.js';

export type TokenizerKind = 'Unigram' | 'WordPiece' | 'BPE';
const KINDS: readonly TokenizerKind[] = ['Unigram', 'WordPiece', 'BPE'];


/** What the pipeline needs from a tokenizer: ids without special tokens, the special ids, word boundaries. */
export interface TextTokenizer {
  readonly kind: TokenizerKind;
  /** sha256 of the tokenizer.json bytes: part of the shard cache key. */
  readonly hash: string;
  /** The model's vocabulary size (embedding rows): highest id + 1. */
  readonly vocabSize: number;
  readonly special: SpecialIds;
  /** 1 where a token starts a word (for whole-word and n-gram masking), per id. */
  readonly wordStart: Uint8Array;
  /** 1 for special tokens (never masked, never drawn as random replacements), per id. */
  readonly isSpecial: Uint8Array;
  /** Token ids of `text`, no special tokens added. */
  encode(text: string): number[];
  decode(ids: readonly number[], skipSpecial?: boolean): string;
  idToToken(id: number): string;
}

/**
 * The part of @huggingface/tokenizers' Tokenizer used here, as its own .d.ts declares it: that file's
 * extensionless relative imports do not resolve under NodeNext, so the class reaches us as `any`.
 */
interface HfTokenizer {
  get_vocab(withAddedTokens?: boolean): Map<string, number>;
  id_to_token(id: number): string | undefined;
  encode(text: string, options?: { add_special_tokens?: boolean }): { ids: number[] };
  decode(ids: number[], options?: { skip_special_tokens?: boolean }): string;
}
const Tokenizer = UntypedTokenizer as new (tokenizerJson: object, config: object) => HfTokenizer;

interface TokenizerJson {
  model?: { type?: unknown; vocab?: unknown; continuing_subword_prefix?: unknown };
  added_tokens?: { id: number; content: string; special?: boolean }[];
  pre_tokenizer?: unknown;
}

/** Loads a Hugging Face tokenizer.json (Unigram as in albert-*-v2, WordPiece or BPE) and checks it has the ALBERT/BERT roles. */
export function loadTokenizer(file: string): TextTokenizer {
  return readTokenizer(file).tokenizer;
}

/**
 * A prepared dataset's tokenizer, checked against the sha256 its shards were tokenized with: a file
 * that is missing or has other bytes (another tokenizer at that path) is an error naming both.
 */
export function datasetTokenizer(dataset: { readonly cacheKey: string; readonly tokenizerFile: string; readonly tokenizerHash: string }): TextTokenizer {
  const needs = `dataset ${dataset.cacheKey} was tokenized with the tokenizer.json of sha256 ${dataset.tokenizerHash}: put that file at ${dataset.tokenizerFile}, or prepare the dataset again`;
  let tokenizer: TextTokenizer;
  try {
    tokenizer = loadTokenizer(dataset.tokenizerFile);
  } catch (err) {
    if (err instanceof TokenizerFileError) throw new TokenizerFileError(`${err.message}; ${needs}`, { cause: err });
    throw err;
  }
  if (tokenizer.hash !== dataset.tokenizerHash) throw new TokenizerFileError(`tokenizer ${dataset.tokenizerFile} has sha256 ${tokenizer.hash}; ${needs}`);
  return tokenizer;
}

/**
 * A tokenizer.json the user gives (`--tokenizer`), loaded and kept in the data directory: the dataset
 * made with it does not depend on where the user keeps the file (a founder serves it to its run).
 */
export function keepGivenTokenizer(file: string, dataDir: string): { readonly tokenizer: TextTokenizer; readonly file: string } {
  const { bytes, tokenizer } = readTokenizer(file);
  return { tokenizer, file: keepTokenizerFile(dataDir, tokenizer.hash, bytes) };
}

function readTokenizer(file: string): { bytes: Buffer; tokenizer: TextTokenizer } {
  let bytes: Buffer;
  try {
    bytes = fs.readFileSync(file);
  } catch (err) {
    throw new TokenizerFileError(`tokenizer ${file}: cannot read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  let json: TokenizerJson;
  try {
    json = JSON.parse(bytes.toString('utf8')) as TokenizerJson;
  } catch (err) {
    throw new TokenizerFileError(`tokenizer ${file}: not JSON (${(err as Error).message}); pass a Hugging Face tokenizer.json`);
  }
  return { bytes, tokenizer: tokenizerFromJson(json, file, createHash('sha256').update(bytes).digest('hex')) };
}

function tokenizerFromJson(json: TokenizerJson, file: string, hash: string): TextTokenizer {
  if (typeof json !== 'object' || json === null || typeof json.model !== 'object' || json.model === null) {
    throw new TokenizerFileError(`tokenizer ${file}: not a Hugging Face tokenizer.json (no "model" section); tokenizer_config.json, vocab.txt or spiece.model are not accepted — pass the tokenizer.json saved by the tokenizers library`);
  }
  const kind = json.model.type;
  if (typeof kind !== 'string' || !KINDS.includes(kind as TokenizerKind)) {
    throw new TokenizerFileError(`tokenizer ${file}: model type ${JSON.stringify(kind)} is not supported; accepted: ${KINDS.join(', ')}`);
  }
  const complete = { added_tokens: [], normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null, ...json };
  let tok: HfTokenizer;
  try {
    tok = new Tokenizer(complete, {});
  } catch (err) {
    throw new TokenizerFileError(`tokenizer ${file}: the ${kind} tokenizer could not be built: ${(err as Error).message}`);
  }
  const vocab = tok.get_vocab(true);
  let maxId = -1;
  for (const id of vocab.values()) if (id > maxId) maxId = id;
  const vocabSize = maxId + 1;
  if (vocabSize < 6) throw new TokenizerFileError(`tokenizer ${file}: vocabulary has ${vocabSize} entries; too small to train on`);
  const find = (role: keyof SpecialIds) => {
    for (const name of SPECIAL_NAMES[role]) {
      const id = vocab.get(name);
      if (id !== undefined) return id;
    }
    throw new TokenizerFileError(`tokenizer ${file}: no ${role} token (looked for ${SPECIAL_NAMES[role].join(' or ')}); ALBERT pretraining needs [CLS], [SEP], [MASK], <pad> and <unk>`);
  };
  const special: SpecialIds = { pad: find('pad'), unk: find('unk'), cls: find('cls'), sep: find('sep'), mask: find('mask') };

  const isSpecial = new Uint8Array(vocabSize);
  for (const id of Object.values(special) as number[]) isSpecial[id] = 1;
  for (const t of json.added_tokens ?? []) if (t.special && t.id < vocabSize) isSpecial[t.id] = 1;
  const wordStart = new Uint8Array(vocabSize);
  const prefix = typeof json.model.continuing_subword_prefix === 'string' ? json.model.continuing_subword_prefix : '##';
  for (const [token, id] of vocab) {
    // WordPiece marks continuations ("##ing"); SentencePiece (▁) and byte-level BPE (Ġ) mark word starts.
    if (kind === 'WordPiece') wordStart[id] = token.startsWith(prefix) ? 0 : 1;
    else wordStart[id] = token.startsWith('▁') || token.startsWith('Ġ') || isSpecial[id] === 1 ? 1 : 0;
  }
  const idToToken = (id: number) => tok.id_to_token(id) ?? `<id ${id}>`;
  return {
    kind: kind as TokenizerKind,
    hash,
    vocabSize,
    special,
    wordStart,
    isSpecial,
    encode: (text) => tok.encode(text, { add_special_tokens: false }).ids,
    decode: (ids, skipSpecial = false) => tok.decode([...ids], { skip_special_tokens: skipSpecial }),
    idToToken,
  };
}

/** Where the data directory keeps a tokenizer.json by its sha256; absolute: a dataset row keeps it, and a node started from another folder reads it. */
export function keptTokenizerFile(dataDir: string, sha256: string): string {
  return path.resolve(dataDir, 'data', 'tokenizers', `${sha256}.json`);
}

/**
 * The first of `files` whose bytes have sha256 `sha256`, with those bytes (read once: what was checked
 * is what the caller uses). A missing or unreadable file is passed over like one of other bytes: it is
 * not that tokenizer, and the next one may be.
 */
export function firstFileWithSha256(files: Iterable<string>, sha256: string): { readonly file: string; readonly bytes: Buffer } | undefined {
  for (const file of files) {
    let bytes: Buffer;
    try {
      bytes = fs.readFileSync(file);
    } catch {
      continue;
    }
    if (createHash('sha256').update(bytes).digest('hex') === sha256) return { file, bytes };
  }
  return undefined;
}

/** Keeps a tokenizer.json (given and checked, or fetched and verified) as a file of the data directory (keptTokenizerFile) and returns its path; tokenizer-checkpoint.ts's keepTokenizer keeps one in the checkpoint store. */
export function keepTokenizerFile(dataDir: string, sha256: string, data: Uint8Array): string {
  const file = keptTokenizerFile(dataDir, sha256);
  writeTokenizerFile(file, data);
  return file;
}

/** Writes a tokenizer.json atomically (temp file + rename: a reader never sees half of it). */
export function writeTokenizerFile(file: string, data: Uint8Array | string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  // per thread: preparations in workers of one process could write the same file at once
  const tmp = `${file}.tmp-${process.pid}-${threadId}`;
  fs.writeFileSync(tmp, data);
  fs.renameSync(tmp, file);
}
