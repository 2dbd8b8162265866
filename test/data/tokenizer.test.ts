import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { ALBERT_SPECIALS } from '../../src/data/special-tokens.js';
import { TokenizerFileError } from '../../src/data/errors.js';
import { loadTokenizer } from '../../src/data/tokenizer.js';
import { WordCounter, trainWordPiece } from '../../src/data/train-wordpiece.js';
import { tmpDir } from '../helpers/tmp.js';

const TEXT = [
  'The President addressed the Congress about the state of the Union.',
  'Congress considered the budget, the army and the navy.',
  'The nation hoped for peace and prosperity in the coming years.',
  'Members of Congress debated the treaties with foreign nations.',
].join(' ');

const specialsAdded = ALBERT_SPECIALS.map(([content, id]) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));

function writeJson(dir: string, name: string, value: unknown): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, JSON.stringify(value));
  return file;
}

test('a trained WordPiece tokenizer.json loads, round-trips text and has ALBERT special ids', (t) => {
  const dir = tmpDir(t);
  const counter = new WordCounter();
  for (let i = 0; i < 20; i++) counter.add(TEXT);
  const file = writeJson(dir, 'tokenizer.json', trainWordPiece(counter.counts, { vocabSize: 300 }));
  const tok = loadTokenizer(file);
  assert.equal(tok.kind, 'WordPiece');
  assert.deepEqual(tok.special, { pad: 0, unk: 1, cls: 2, sep: 3, mask: 4 });
  assert.ok(tok.vocabSize > 50 && tok.vocabSize <= 300, `vocab ${tok.vocabSize}`);
  const sample = 'The Congress debated the budget of the nation.';
  const ids = tok.encode(sample);
  assert.ok(ids.every((id) => id >= 5 && id < tok.vocabSize), 'plain text encodes to non-special ids');
  assert.equal(tok.decode(ids), sample.toLowerCase());
  // Frequent words became whole tokens; an unseen word is split into pieces, a continuation is not a word start.
  assert.equal(tok.idToToken(tok.encode('congress')[0]!), 'congress');
  const pieces = tok.encode('nationhood');
  assert.ok(pieces.length > 1);
  assert.equal(tok.wordStart[pieces[0]!], 1);
  assert.equal(tok.wordStart[pieces[1]!], 0);
  for (const [, id] of ALBERT_SPECIALS) assert.equal(tok.isSpecial[id], 1);
});

test('training is deterministic and refuses a vocabulary smaller than the alphabet', () => {
  const counter = new WordCounter();
  counter.add(TEXT);
  counter.add(TEXT);
  assert.deepEqual(trainWordPiece(counter.counts, { vocabSize: 120 }), trainWordPiece(counter.counts, { vocabSize: 120 }));
  assert.throws(() => trainWordPiece(counter.counts, { vocabSize: 10 }), /--vocab-size 10 is smaller than the alphabet/);
});

test("an ALBERT-style SentencePiece Unigram tokenizer.json (as albert-large-v2's) loads and encodes", (t) => {
  const dir = tmpDir(t);
  const pieces: [string, number][] = [...ALBERT_SPECIALS.map(([c]) => [c, 0] as [string, number]), ['▁', -3], ['▁the', -2], ['▁cat', -3], ['s', -3], ['▁sat', -3], ['▁on', -3], ['▁mat', -4]];
  for (const ch of 'abcdefghijklmnopqrstuvwxyz') pieces.push([ch, -8]);
  const file = writeJson(dir, 'tokenizer.json', {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: specialsAdded,
    // The sections of albert-base-v2/large-v2's tokenizer.json (its Precompiled charsmap normaliser left out).
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Replace', pattern: { String: '``' }, content: '"' }, { type: 'Replace', pattern: { String: "''" }, content: '"' }, { type: 'NFKD' }, { type: 'StripAccents' }, { type: 'Lowercase' }] },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, { type: 'Metaspace', replacement: '▁', add_prefix_space: true }] },
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
      pair: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }, { SpecialToken: { id: '[SEP]', type_id: 1 } }],
      special_tokens: { '[CLS]': { id: '[CLS]', ids: [2], tokens: ['[CLS]'] }, '[SEP]': { id: '[SEP]', ids: [3], tokens: ['[SEP]'] } },
    },
    decoder: { type: 'Metaspace', replacement: '▁', add_prefix_space: true },
    model: { type: 'Unigram', unk_id: 1, vocab: pieces },
  });
  const tok = loadTokenizer(file);
  assert.equal(tok.kind, 'Unigram');
  assert.deepEqual(tok.special, { pad: 0, unk: 1, cls: 2, sep: 3, mask: 4 });
  assert.equal(tok.vocabSize, pieces.length);
  const ids = tok.encode('The  cats sat on the mat');
  assert.deepEqual(ids.map((id) => tok.idToToken(id)), ['▁the', '▁cat', 's', '▁sat', '▁on', '▁the', '▁mat']);
  assert.equal(tok.decode(ids), 'the cats sat on the mat');
  assert.equal(tok.wordStart[ids[1]!], 1);
  assert.equal(tok.wordStart[ids[2]!], 0);
});

test('a BPE tokenizer.json with BERT-style special tokens loads', (t) => {
  const dir = tmpDir(t);
  const vocab = { '[PAD]': 0, '[UNK]': 1, '[CLS]': 2, '[SEP]': 3, '[MASK]': 4, a: 5, b: 6, ab: 7, c: 8 };
  const file = writeJson(dir, 'bpe.json', {
    added_tokens: Object.entries(vocab).slice(0, 5).map(([content, id]) => ({ id, content, special: true, normalized: false, single_word: false, lstrip: false, rstrip: false })),
    pre_tokenizer: { type: 'Whitespace' },
    model: { type: 'BPE', vocab, merges: ['a b'], unk_token: '[UNK]' },
  });
  const tok = loadTokenizer(file);
  assert.equal(tok.kind, 'BPE');
  assert.deepEqual(tok.special, { pad: 0, unk: 1, cls: 2, sep: 3, mask: 4 });
  assert.deepEqual(tok.encode('ab c a'), [7, 8, 5]);
});

test('a tokenizer.json of the wrong kind is a clear error', (t) => {
  const dir = tmpDir(t);
  const cases: [string, unknown, RegExp][] = [
    ['tokenizer_config.json', { do_lower_case: true, model_max_length: 512 }, /not a Hugging Face tokenizer\.json \(no "model" section\)/],
    ['wordlevel.json', { model: { type: 'WordLevel', vocab: { a: 0 }, unk_token: 'a' } }, /model type "WordLevel" is not supported; accepted: Unigram, WordPiece, BPE/],
    ['gpt2-like.json', { added_tokens: [], model: { type: 'BPE', vocab: { '<pad>': 0, '<unk>': 1, '<s>': 2, '</s>': 3, a: 4, b: 5 }, merges: [] } }, /no mask token \(looked for \[MASK\] or <mask>\)/],
  ];
  for (const [name, json, pattern] of cases) assert.throws(() => loadTokenizer(writeJson(dir, name, json)), (err: Error) => err instanceof TokenizerFileError && pattern.test(err.message) && err.message.includes(name));
  fs.writeFileSync(path.join(dir, 'spiece.model'), Buffer.from([0x0a, 0x11, 0x00, 0xff]));
  assert.throws(() => loadTokenizer(path.join(dir, 'spiece.model')), /not JSON/);
  assert.throws(() => loadTokenizer(path.join(dir, 'missing.json')), /cannot read \(ENOENT\)/);
});
