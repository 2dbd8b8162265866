import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { createGzip } from 'node:zlib';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import type { Document } from '../../src/data/document.js';
import { DataError } from '../../src/data/errors.js';
import { openSource, type CorpusSource, type SkippedInput } from '../../src/data/sources.js';
import { splitSentences } from '../../src/data/sentences.js';
import { LINE_PIECE_CHARS, textLines } from '../../src/data/text-check.js';
import { MAX_DOCUMENT_CHARS, isWikiText } from '../../src/data/wikitext.js';
import { writeZip } from '../helpers/archives.js';
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

async function documentsOf(source: CorpusSource, onSkip?: (s: SkippedInput) => void): Promise<Document[]> {
  const docs: Document[] = [];
  for await (const d of source.documents(onSkip)) docs.push(d);
  return docs;
}

test('WikiText raw: article headings delimit documents, section headings are dropped, blank lines delimit paragraphs', async (t) => {
  assert.equal(isWikiText(WIKI.split('\n')), true);
  assert.equal(isWikiText(['Just some text.', '', 'More text.']), false);
  const dir = tmpDir(t);
  fs.writeFileSync(path.join(dir, 'wiki.train.raw'), WIKI);
  const docs = await documentsOf(await openSource(path.join(dir, 'wiki.train.raw'), { downloadDir: dir }));
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
  const docs = await documentsOf(source, (s) => skipped.push(s));
  assert.deepEqual(
    docs.map((d) => d.title),
    ['a.txt', 'Valkyria Chronicles III', 'Tower Building of the Little Rock Arsenal', 'c.jsonl:1', 'c.jsonl:4'],
  );
  assert.deepEqual(docs[0]!.paragraphs, ['First paragraph here. Second sentence.', 'Another paragraph.']);
  const reasons = Object.fromEntries(skipped.map((s) => [path.basename(s.file), s.reason]));
  assert.match(reasons['d.txt']!, /binary/);
  assert.match(reasons['e.txt']!, /^not valid UTF-8 text \(an invalid byte near offset 2\); a Latin-1 or Windows-1252 file can be converted first, e\.g\. `iconv -f latin1 -t utf-8`$/);
  assert.match(reasons['f.txt']!, /empty/);
  assert.match(reasons['c.jsonl:2']!, /JSON/);
  assert.match(reasons['c.jsonl:3']!, /"body"/);

  // The hash follows the content: same bytes, same hash; one byte changed, another hash.
  assert.equal((await openSource(dir, { downloadDir: dir, field: 'body' })).hash, source.hash);
  fs.appendFileSync(path.join(dir, 'a.txt'), 'x');
  assert.notEqual((await openSource(dir, { downloadDir: dir, field: 'body' })).hash, source.hash);
});

/** The first bytes of each compression or archive format that is not read, and how each is named and unpacked. */
const UNREAD = [
  { ext: 'xz', head: Buffer.from('fd377a585a000004e6d6b446', 'hex'), what: 'xz-compressed data', unpack: 'xz -dk' },
  { ext: 'bz2', head: Buffer.concat([Buffer.from('BZh91AY&SY'), Buffer.from('c3f2a8b1', 'hex')]), what: 'bzip2-compressed data', unpack: 'bunzip2 -k' },
  { ext: 'zst', head: Buffer.from('28b52ffd2400110000', 'hex'), what: 'zstd-compressed data', unpack: 'unzstd' },
  { ext: '7z', head: Buffer.from('377abcaf271c000479b1', 'hex'), what: 'a 7z archive', unpack: '7z x' },
  { ext: 'rar', head: Buffer.concat([Buffer.from('Rar!'), Buffer.from('1a0701003392b5e5', 'hex')]), what: 'a RAR archive', unpack: 'unrar x' },
];
const unreadReason = (u: (typeof UNREAD)[number]) => `${u.what}, which is not read: unpack it first (e.g. \`${u.unpack}\`), or give it as .zip .tar .tar.gz .tgz .gz`;

test('a .xz, .bz2, .zst, .7z or .rar source is skipped saying which format it is and what to do, alone or in a folder; a text beginning "BZh" is read', async (t) => {
  const dir = tmpDir(t);
  const corpus = path.join(dir, 'corpus');
  fs.mkdirSync(corpus);
  for (const u of UNREAD) {
    const file = path.join(corpus, `wiki.txt.${u.ext}`);
    fs.writeFileSync(file, u.head);
    const skipped: SkippedInput[] = [];
    assert.deepEqual(await documentsOf(await openSource(file, { downloadDir: dir }), (s) => skipped.push(s)), []);
    assert.deepEqual(skipped, [{ file, reason: unreadReason(u) }]);
  }
  fs.writeFileSync(path.join(corpus, 'bzh.txt'), 'BZh9 is a code. It names nothing.\n');
  const skipped: SkippedInput[] = [];
  const docs = await documentsOf(await openSource(corpus, { downloadDir: dir }), (s) => skipped.push(s));
  assert.deepEqual(docs.map((d) => d.title), ['bzh.txt']);
  assert.deepEqual(
    skipped.map((s) => [path.basename(s.file), s.reason]),
    UNREAD.map((u) => [`wiki.txt.${u.ext}`, unreadReason(u)]).sort(),
  );

  // a dump that is skipped unread is not read through to hash it: bytes past its first chunk leave the hash as it is
  const dump = path.join(corpus, 'wiki.txt.xz');
  fs.writeFileSync(dump, Buffer.concat([UNREAD[0]!.head, Buffer.alloc(1 << 20)]));
  const hash = (await openSource(corpus, { downloadDir: dir })).hash;
  fs.appendFileSync(dump, 'more');
  assert.equal((await openSource(corpus, { downloadDir: dir })).hash, hash);
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
  const docs = await documentsOf(slice);
  assert.equal(docs.length, 2);
  assert.notEqual(slice.hash, all.hash);
  const text = docs.map((d) => d.paragraphs.join(' ')).join(' ');
  assert.ok(text.length > 5000, `expected a few KB of text, got ${text.length}`);
  for (const word of [' the ', ' of ', ' and ']) assert.ok(text.includes(word), `expected English text containing "${word}"`);
});

/** A WikiText-103 layout (`wikitext-103-raw/wiki.{train,valid}.raw`) plus a file that is not text. */
const ARCHIVE_FILES: Record<string, string | Buffer> = {
  'wikitext-103-raw/wiki.train.raw': WIKI,
  'wikitext-103-raw/wiki.valid.raw': '\n = Second Article = \n\n Its only paragraph . \n',
  'wikitext-103-raw/data.arrow': Buffer.from([0x41, 0x52, 0x52, 0x00, 0x01]),
};
const ARCHIVE_TITLES = ['Valkyria Chronicles III', 'Tower Building of the Little Rock Arsenal', 'Second Article'];

async function writeTar(file: string, gzip: boolean, files: Record<string, string | Buffer>): Promise<void> {
  const pack = tar.pack();
  for (const [name, body] of Object.entries(files)) pack.entry({ name }, body);
  pack.finalize();
  await (gzip ? pipeline(pack, createGzip(), fs.createWriteStream(file)) : pipeline(pack, fs.createWriteStream(file)));
}

for (const [suffix, write] of [
  ['.zip', async (f: string) => writeZip(f, ARCHIVE_FILES)],
  ['.tar', (f: string) => writeTar(f, false, ARCHIVE_FILES)],
  ['.tar.gz', (f: string) => writeTar(f, true, ARCHIVE_FILES)],
  ['.tgz', (f: string) => writeTar(f, true, ARCHIVE_FILES)],
] as const) {
  test(`a ${suffix} archive is read entry by entry: its text files as WikiText, anything else skipped with a reason`, async (t) => {
    const dir = tmpDir(t);
    const file = path.join(dir, `wikitext-103-raw-v1${suffix}`);
    await write(file);
    const skipped: SkippedInput[] = [];
    const source = await openSource(file, { downloadDir: dir });
    const docs = await documentsOf(source, (s) => skipped.push(s));
    assert.deepEqual(docs.map((d) => d.title), ARCHIVE_TITLES);
    assert.deepEqual(docs[2]!.paragraphs, ['Its only paragraph .']);
    assert.deepEqual(skipped.map((s) => s.file), [`${file}:wikitext-103-raw/data.arrow`]);
    assert.match(skipped[0]!.reason, /not a text file/);
    // maxDocuments stops inside the archive (and closes it)
    assert.equal((await documentsOf(await openSource(file, { downloadDir: dir, maxDocuments: 1 }))).length, 1);
  });
}

test('a .gz file is read as the file it compresses; a folder lists archives beside text files', async (t) => {
  const dir = tmpDir(t);
  await pipeline(async function* () {
    yield Buffer.from(WIKI);
  }, createGzip(), fs.createWriteStream(path.join(dir, 'wiki.train.raw.gz')));
  writeZip(path.join(dir, 'more.zip'), { 'b.txt': 'Plain text. Two sentences.\n' });
  const docs = await documentsOf(await openSource(dir, { downloadDir: path.join(dir, 'dl') }));
  assert.deepEqual(docs.map((d) => d.title), ['b.txt', 'Valkyria Chronicles III', 'Tower Building of the Little Rock Arsenal']);
});

test('a corrupt archive is a clear error naming it; a bad entry in a tar is skipped and the next one is read', async (t) => {
  const dir = tmpDir(t);
  const bad = path.join(dir, 'broken.zip');
  fs.writeFileSync(bad, 'this is not a zip file at all, just text of some length');
  await assert.rejects(documentsOf(await openSource(bad, { downloadDir: dir })), /archive .*broken\.zip: cannot read it as zip/);
  const mixed = path.join(dir, 'mixed.tar');
  const binary = Buffer.concat([Buffer.from(' = First = \n\n Some words here . \n'), Buffer.alloc(200_000, 0)]);
  await writeTar(mixed, false, { 'a.raw': binary, 'b.raw': WIKI });
  const skipped: SkippedInput[] = [];
  const docs = await documentsOf(await openSource(mixed, { downloadDir: dir }), (s) => skipped.push(s));
  assert.deepEqual(docs.map((d) => d.title), ARCHIVE_TITLES.slice(0, 2));
  assert.equal(skipped.length, 1);
  assert.match(skipped[0]!.reason, /binary/);
});

test('a truncated .gz or .tar.gz (a download cut short) is a DataError naming the archive, not a raw zlib error', async (t) => {
  const dir = tmpDir(t);
  // large enough that the cut falls inside the first entry's bytes, after its header was read
  const text = Array.from({ length: 400 }, (_, i) => WIKI.replace('Valkyria', `Valkyria ${i}`)).join('\n');
  const whole = { gz: path.join(dir, 'whole.raw.gz'), tgz: path.join(dir, 'whole.tar.gz') };
  await pipeline(async function* () {
    yield Buffer.from(text);
  }, createGzip(), fs.createWriteStream(whole.gz));
  await writeTar(whole.tgz, true, { 'wiki.train.raw': text });
  for (const [name, from, kind] of [['cut.raw.gz', whole.gz, 'gz'], ['cut.tar.gz', whole.tgz, 'tar.gz']] as const) {
    const bytes = fs.readFileSync(from);
    const cut = path.join(dir, name);
    fs.writeFileSync(cut, bytes.subarray(0, bytes.length >> 1));
    await assert.rejects(documentsOf(await openSource(cut, { downloadDir: dir })), (err: Error) => {
      assert.ok(err instanceof DataError, `${err.name}: ${err.message}`);
      assert.equal(err.message, `archive ${cut}: cannot read it as ${kind} (unexpected end of file)`);
      return true;
    });
  }
});

test('plain text is read as a stream: a long file becomes several documents of bounded size', async (t) => {
  const dir = tmpDir(t);
  const para = 'A sentence of plain text here. Another one follows it.';
  const count = Math.ceil((2.5 * MAX_DOCUMENT_CHARS) / para.length);
  fs.writeFileSync(path.join(dir, 'long.txt'), Array.from({ length: count }, () => para).join('\n\n'));
  const docs = await documentsOf(await openSource(path.join(dir, 'long.txt'), { downloadDir: dir }));
  assert.deepEqual(docs.map((d) => d.title), ['long.txt', 'long.txt (part 2)', 'long.txt (part 3)']);
  assert.equal(docs.reduce((n, d) => n + d.paragraphs.length, 0), count);
  assert.ok(docs.every((d) => d.paragraphs.join('').length <= MAX_DOCUMENT_CHARS + para.length));
});

test('a file with no blank line (one sentence per line) and a WikiText article of any length are cut into documents of bounded size', async (t) => {
  const dir = tmpDir(t);
  const sentence = 'A sentence of plain text here. Another one follows it.';
  const count = Math.ceil((2.5 * MAX_DOCUMENT_CHARS) / sentence.length);
  const lines = Array.from({ length: count }, () => sentence);
  fs.writeFileSync(path.join(dir, 'lines.txt'), lines.join('\n'));
  fs.writeFileSync(path.join(dir, 'one.raw'), ` = Only = \n\n${lines.join('\n\n')}\n`);
  const docs = await documentsOf(await openSource(dir, { downloadDir: path.join(dir, 'dl') }));
  assert.deepEqual(docs.map((d) => d.title), ['lines.txt', 'lines.txt (part 2)', 'lines.txt (part 3)', 'Only', 'Only (part 2)', 'Only (part 3)']);
  for (const d of docs) {
    assert.ok(d.paragraphs.join('').length <= MAX_DOCUMENT_CHARS + sentence.length, `${d.title}: ${d.paragraphs.join('').length} characters`);
    assert.ok(d.paragraphs.every((p) => p.length <= MAX_DOCUMENT_CHARS + sentence.length));
  }
  // nothing is lost at the cuts
  assert.equal(docs.slice(0, 3).reduce((n, d) => n + d.paragraphs.join(' ').length, 0), lines.join(' ').length - 2);
});

test('a symbolic link in a zip is not read as text; in a folder, a link to a file is read as the file, links to folders and broken links are not followed', async (t) => {
  const dir = tmpDir(t);
  const zip = path.join(dir, 'links.zip');
  writeZip(zip, { 'wiki/passwd.txt': '/etc/passwd', 'wiki/a.raw': WIKI }, ['wiki/passwd.txt']);
  const skipped: SkippedInput[] = [];
  assert.deepEqual((await documentsOf(await openSource(zip, { downloadDir: dir }), (s) => skipped.push(s))).map((d) => d.title), ARCHIVE_TITLES.slice(0, 2));
  assert.deepEqual(skipped, []);

  const elsewhere = path.join(dir, 'big-disk');
  fs.mkdirSync(elsewhere);
  fs.writeFileSync(path.join(elsewhere, 'wiki.train.raw'), WIKI);
  const corpus = path.join(dir, 'corpus');
  fs.mkdirSync(corpus);
  fs.symlinkSync(path.join(elsewhere, 'wiki.train.raw'), path.join(corpus, 'wiki.train.raw'));
  fs.symlinkSync(path.join(dir, 'gone.txt'), path.join(corpus, 'gone.txt'));
  fs.symlinkSync(corpus, path.join(corpus, 'loop.txt'));
  assert.deepEqual((await documentsOf(await openSource(corpus, { downloadDir: path.join(dir, 'dl') }))).map((d) => d.title), ARCHIVE_TITLES.slice(0, 2));
});

test('sha256 given for a local file is checked as for a download; for a folder it is an error', async (t) => {
  const dir = tmpDir(t);
  const file = path.join(dir, 'wiki.train.raw');
  fs.writeFileSync(file, WIKI);
  const sha = createHash('sha256').update(WIKI).digest('hex');
  assert.equal((await documentsOf(await openSource(file, { downloadDir: dir, sha256: sha.toUpperCase() }))).length, 2);
  await assert.rejects(openSource(file, { downloadDir: dir, sha256: 'ab'.repeat(32) }), (err: Error) => err instanceof DataError && err.message === `checksum mismatch for ${file}: expected sha256 ${'ab'.repeat(32)}, got ${sha}`);
  await assert.rejects(openSource(dir, { downloadDir: dir, sha256: sha }), /--sha256 checks one file \(a download or a local file\), but .* is a folder/);
});

test('a line longer than a piece is read in pieces: none over the cap, each cut after a whitespace, together the line; a JSONL line stays whole', async () => {
  const cap = 1000;
  const words = ['one', 'two', 'three', 'fourteen', 'Über', '𝔘nicode'];
  const line = Array.from({ length: 3_000_000 / 6 }, (_, i) => words[i % words.length]).join(' ');
  // a word longer than half a piece has no whitespace to cut at: it is cut at the cap, never inside a surrogate pair
  const longWord = `x${'𝔘'.repeat(cap)} end`;
  const input = `short first line\n${line}\r\n\n${longWord}\n${line}`;
  const chunks = async function* () {
    const bytes = Buffer.from(input);
    for (let at = 0; at < bytes.length; at += 65536) yield bytes.subarray(at, at + 65536);
  };
  const pieces: string[] = [];
  for await (const piece of textLines('x.txt', chunks(), { maxPieceChars: cap })) pieces.push(piece);
  assert.ok(pieces.every((p) => p.length <= cap), `longest piece ${Math.max(...pieces.map((p) => p.length))}`);
  assert.equal(pieces[0], 'short first line');
  const blank = pieces.indexOf('');
  assert.equal(pieces.slice(1, blank).join(''), line);
  assert.deepEqual(pieces.slice(blank + 1, blank + 4).map((p) => p.length), [cap - 1, cap, 6]);
  assert.equal(pieces.slice(blank + 1, blank + 4).join(''), longWord);
  assert.equal(pieces.slice(blank + 4).join(''), line);
  // a cut falls after a whitespace wherever the piece's second half has one (the last piece of a line ends where the line does)
  for (const p of [...pieces.slice(1, blank - 1), ...pieces.slice(blank + 4, -1)]) assert.match(p, /\s$/);

  const whole: string[] = [];
  for await (const l of textLines('x.jsonl', chunks())) whole.push(l);
  assert.deepEqual(whole, ['short first line', line, '', longWord, line]);
});

test('a plain-text file of one long line (no newline) is read as documents of bounded size, none of it lost', async (t) => {
  const dir = tmpDir(t);
  const sentence = 'A sentence of plain text here. Another one follows it. ';
  const line = sentence.repeat(Math.ceil((2.5 * MAX_DOCUMENT_CHARS) / sentence.length));
  fs.writeFileSync(path.join(dir, 'one-line.txt'), line);
  const docs = await documentsOf(await openSource(path.join(dir, 'one-line.txt'), { downloadDir: dir }));
  assert.deepEqual(docs.map((d) => d.title), ['one-line.txt', 'one-line.txt (part 2)', 'one-line.txt (part 3)']);
  assert.ok(docs.every((d) => d.paragraphs.every((p) => p.length <= MAX_DOCUMENT_CHARS + LINE_PIECE_CHARS)));
  assert.equal(docs.flatMap((d) => d.paragraphs).join(' '), line.trim());
});
