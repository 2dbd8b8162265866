import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { openSource, type SkippedInput } from '../../src/data/sources.js';
import { splitSentences } from '../../src/data/sentences.js';
import { isWikiText, parseWikiText } from '../../src/data/wikitext.js';
import { tmpDir } from '../helpers/tmp.js';

const WIKI = [
  '',
  ' = Valkyria Chronicles III = ',
  '',
  ' Senjō no Valkyria 3 is a tactical role @-@ playing video game . It was released in 2011 . ',
  ' The game began development in 2010 . ',
  '',
  ' = = Gameplay = = ',
  '',
  ' As with previous games , the player fights battles . ',
  '',
  ' = = = Combat = = = ',
  ' Troops move across the map . ',
  '',
  ' = Tower Building of the Little Rock Arsenal = ',
  '',
  ' The Tower Building is a building in Little Rock , Arkansas . ',
  '',
].join('\n');

test('WikiText raw: article headings delimit documents, section headings are dropped, blank lines delimit paragraphs', () => {
  assert.equal(isWikiText(WIKI), true);
  assert.equal(isWikiText('Just some text.\n\nMore text.'), false);
  const docs = parseWikiText(WIKI);
  assert.deepEqual(
    docs.map((d) => d.title),
    ['Valkyria Chronicles III', 'Tower Building of the Little Rock Arsenal'],
  );
  assert.equal(docs[0]!.paragraphs.length, 4);
  assert.ok(docs[0]!.paragraphs.every((p) => !p.includes('= =')));
  assert.match(docs[0]!.paragraphs[2]!, /^As with previous games/);
  assert.deepEqual(docs[1]!.paragraphs, ['The Tower Building is a building in Little Rock , Arkansas .']);
});

test('sentence segmentation splits on end punctuation but not after abbreviations or initials', () => {
  assert.deepEqual(splitSentences('Mr. Smith went to Washington. He met Dr. J. Jones there! Did it rain? Yes.'), ['Mr. Smith went to Washington.', 'He met Dr. J. Jones there!', 'Did it rain?', 'Yes.']);
  assert.deepEqual(splitSentences('It cost 3.5 million dollars in 1790. "Quite so." Then more.'), ['It cost 3.5 million dollars in 1790.', '"Quite so."', 'Then more.']);
});

test('a folder: text, WikiText and JSONL files are read in order; binary, non-UTF-8, empty files and bad JSONL lines are skipped with a reason', async (t) => {
  const dir = tmpDir(t);
  fs.mkdirSync(path.join(dir, 'sub'));
  fs.writeFileSync(path.join(dir, 'a.txt'), 'First paragraph here. Second sentence.\n\nAnother paragraph.\n');
  fs.writeFileSync(path.join(dir, 'b.tokens'), WIKI);
  fs.writeFileSync(path.join(dir, 'sub', 'c.jsonl'), '{"body":"From JSON. Two sentences."}\nnot json\n{"other":1}\n{"body":"Second record."}\n');
  fs.writeFileSync(path.join(dir, 'd.txt'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x00, 0x01]));
  fs.writeFileSync(path.join(dir, 'e.txt'), Buffer.from([0x48, 0x69, 0xff, 0xfe, 0x20, 0x74]));
  fs.writeFileSync(path.join(dir, 'f.txt'), '   \n\n');
  fs.writeFileSync(path.join(dir, 'ignored.bin'), 'not listed');
  const source = await openSource(dir, { downloadDir: path.join(dir, 'dl'), field: 'body' });
  const skipped: SkippedInput[] = [];
  const docs = [...source.documents((s) => skipped.push(s))];
  assert.deepEqual(
    docs.map((d) => d.title),
    ['a.txt', 'Valkyria Chronicles III', 'Tower Building of the Little Rock Arsenal', 'c.jsonl:1', 'c.jsonl:4'],
  );
  assert.deepEqual(docs[0]!.paragraphs, ['First paragraph here. Second sentence.', 'Another paragraph.']);
  const reasons = Object.fromEntries(skipped.map((s) => [path.basename(s.file), s.reason]));
  assert.match(reasons['d.txt']!, /binary/);
  assert.match(reasons['e.txt']!, /UTF-8/);
  assert.match(reasons['f.txt']!, /empty/);
  assert.match(reasons['c.jsonl:2']!, /JSON/);
  assert.match(reasons['c.jsonl:3']!, /"body"/);

  // The hash follows the content: same bytes, same hash; one byte changed, another hash.
  assert.equal((await openSource(dir, { downloadDir: dir, field: 'body' })).hash, source.hash);
  fs.appendFileSync(path.join(dir, 'a.txt'), 'x');
  assert.notEqual((await openSource(dir, { downloadDir: dir, field: 'body' })).hash, source.hash);
});

test('a missing path or a folder without text files is a clear error', async (t) => {
  const dir = tmpDir(t);
  await assert.rejects(openSource(path.join(dir, 'nope'), { downloadDir: dir }), /no such file or folder/);
  fs.writeFileSync(path.join(dir, 'x.bin'), 'data');
  await assert.rejects(openSource(dir, { downloadDir: dir }), /no text files found/);
});

test('the bundled corpus is real English prose available offline, and maxDocuments takes a slice', async (t) => {
  const dir = tmpDir(t);
  const all = await openSource('bundled', { downloadDir: dir });
  const slice = await openSource('bundled', { downloadDir: dir, maxDocuments: 2 });
  const docs = [...slice.documents()];
  assert.equal(docs.length, 2);
  assert.notEqual(slice.hash, all.hash);
  const text = docs.map((d) => d.paragraphs.join(' ')).join(' ');
  assert.ok(text.length > 5000, `expected a few KB of text, got ${text.length}`);
  for (const word of [' the ', ' of ', ' and ']) assert.ok(text.includes(word), `expected English text containing "${word}"`);
});
