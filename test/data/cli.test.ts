import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import test, { type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import { downloadPath } from '../../src/data/download.js';
import { DATABASE_FILE } from '../../src/store/index.js';
import { MAX_DOCUMENT_CHARS } from '../../src/data/wikitext.js';
import { CLI, runCli, startProcess, type Proc } from '../helpers/cli.js';
import { smallDisk } from '../helpers/disk.js';
import { waitFor } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

test('cohort data prepare → stats → sample on a slice of the bundled corpus; a second prepare reuses the shards', async (t) => {
  const dir = tmpDir(t);
  const prepare = await runCli(['--data-dir', dir, 'data', 'prepare', '--max-documents', '4', '--vocab-size', '1200', '--json']);
  assert.equal(prepare.code, 0, prepare.stderr);
  const result = JSON.parse(prepare.stdout) as { reused: boolean; cacheKey: string; documents: number; examples: number; tokens: number; shards: number; vocabSize: number; tokenizer: string };
  assert.equal(result.reused, false);
  assert.equal(result.documents, 4);
  assert.ok(result.examples > 0 && result.tokens > result.examples);
  assert.ok(fs.existsSync(result.tokenizer) && result.tokenizer.startsWith(dir));
  assert.match(prepare.stderr, /training tokenizer|tokenizing/);

  const again = await runCli(['--data-dir', dir, 'data', 'prepare', '--max-documents', '4', '--vocab-size', '1200']);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, new RegExp(`^reused dataset ${result.cacheKey}: 4 documents, \\d+ sentences, ${result.examples} examples`));

  const stats = await runCli(['--data-dir', dir, 'data', 'stats', '--json']);
  assert.equal(stats.code, 0, stats.stderr);
  const s = JSON.parse(stats.stdout) as { cacheBytes: number; datasets: { cacheKey: string; examples: number; shards: number; datasetId: string; tokenizerSha256: string }[] };
  assert.deepEqual(s.datasets.map((d) => [d.cacheKey, d.examples, d.shards]), [[result.cacheKey, result.examples, result.shards]]);
  const tokenizerSha = createHash('sha256').update(fs.readFileSync(result.tokenizer)).digest('hex');
  assert.equal(s.datasets[0]!.tokenizerSha256, tokenizerSha);
  assert.match(s.datasets[0]!.datasetId, /^[0-9a-f]{64}$/);
  const text = await runCli(['--data-dir', dir, 'data', 'stats']);
  assert.match(text.stdout, new RegExp(`dataset id ${s.datasets[0]!.datasetId}\n  tokenizer sha256 ${tokenizerSha}\n`));
  assert.ok(s.cacheBytes > 0);

  const sample = await runCli(['--data-dir', dir, 'data', 'sample', '--n', '3']);
  assert.equal(sample.code, 0, sample.stderr);
  const examples = sample.stdout.split('\n').filter((l) => l.startsWith('example '));
  assert.equal(examples.length, 3);
  for (const line of examples) assert.match(line, /sentence_order_label [01] \((original order|segments swapped)\); \d+ of \d+ tokens predicted/);
  assert.match(sample.stdout, /\[CLS\] .* \[SEP\] .* \[SEP\]/);
  assert.match(sample.stdout, /⟦\[MASK\]→[^⟧]+⟧/);
});

test('cohort data prepare reads a local WikiText file and reports skipped files; bad flag values exit 2 naming the flag', async (t) => {
  const dir = tmpDir(t);
  const corpus = path.join(dir, 'corpus');
  fs.mkdirSync(corpus);
  const article = (title: string) => ` = ${title} = \n\n` + Array.from({ length: 30 }, (_, i) => ` The ${title} paragraph ${i} talks about rivers . It also mentions mountains and valleys number ${i} . `).join('\n') + '\n';
  fs.writeFileSync(path.join(corpus, 'wiki.train.raw.txt'), article('Alpha') + article('Beta'));
  fs.writeFileSync(path.join(corpus, 'broken.txt'), Buffer.from([0xff, 0xfe, 0x00, 0x01]));
  const r = await runCli(['--data-dir', dir, 'data', 'prepare', '--source', corpus, '--vocab-size', '200', '--max-seq-len', '32']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /prepared dataset \w+: 2 documents/);
  assert.match(r.stderr, /skipped .*broken\.txt: binary/);

  for (const [flag, value, accepted] of [
    ['--max-seq-len', '7', /an integer from 16 to 8192/],
    ['--format', 'xml', /accepted: auto, text, wikitext, jsonl/],
    ['--short-seq-prob', '2', /a number from 0 to 1/],
    ['--sha256', 'abc', /64 hex digits/],
    ['--tokenizer', path.join(dir, 'none.json'), /an existing tokenizer\.json file/],
  ] as const) {
    const bad = await runCli(['--data-dir', dir, 'data', 'prepare', flag, value]);
    assert.equal(bad.code, 2, `${flag} ${value}: ${bad.stderr}`);
    assert.match(bad.stderr, new RegExp(`${flag}: invalid value`));
    assert.match(bad.stderr, accepted);
  }
  const badTok = path.join(dir, 'tokenizer_config.json');
  fs.writeFileSync(badTok, '{"do_lower_case": true}');
  const wrongKind = await runCli(['--data-dir', dir, 'data', 'prepare', '--source', corpus, '--tokenizer', badTok]);
  assert.equal(wrongKind.code, 1);
  assert.match(wrongKind.stderr, /^cohort: tokenizer .*tokenizer_config\.json: not a Hugging Face tokenizer\.json/);
  assert.doesNotMatch(wrongKind.stderr, /\n\s+at /, 'a clear message, not a stack trace');
});

test('cohort data prepare --source x.txt.xz fails saying it is xz-compressed and what to do', async (t) => {
  const dir = tmpDir(t);
  const source = path.join(dir, 'wiki.txt.xz');
  fs.writeFileSync(source, Buffer.from('fd377a585a000004e6d6b446', 'hex'));
  const r = await runCli(['--data-dir', dir, 'data', 'prepare', '--source', source, '--vocab-size', '200']);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`skipped ${source}: xz-compressed data, which is not read: unpack it first \\(e\\.g\\. \`xz -dk\`\\), or give it as \\.zip \\.tar \\.tar\\.gz \\.tgz \\.gz`));
});

test('a dataset prepared with a relative --data-dir is read from another folder (its tokenizer path is absolute)', async (t) => {
  const dir = tmpDir(t);
  const prepare = await runCli(['--data-dir', 'rel', 'data', 'prepare', '--max-documents', '2', '--vocab-size', '300', '--max-seq-len', '32', '--json'], { cwd: dir });
  assert.equal(prepare.code, 0, prepare.stderr);
  const { tokenizer } = JSON.parse(prepare.stdout) as { tokenizer: string };
  assert.ok(tokenizer.startsWith(path.join(fs.realpathSync(dir), 'rel', 'data') + path.sep), tokenizer);
  const sample = await runCli(['--data-dir', path.join(dir, 'rel'), 'data', 'sample', '--n', '1']);
  assert.equal(sample.code, 0, sample.stderr);
  assert.match(sample.stdout, /^example 1: /);
});

test('a dataset whose row holds a relative tokenizer path (prepared so by an older Cohort) finds its tokenizer in its data directory, from any folder; a missing one is an error naming the path and its sha256', async (t) => {
  const dir = tmpDir(t);
  const prepare = await runCli(['--data-dir', 'rel', 'data', 'prepare', '--max-documents', '2', '--vocab-size', '300', '--max-seq-len', '32', '--json'], { cwd: dir });
  assert.equal(prepare.code, 0, prepare.stderr);
  const { tokenizer, tokenizerSha256 } = JSON.parse(prepare.stdout) as { tokenizer: string; tokenizerSha256: string };
  // what an older Cohort stored for `--data-dir rel`: the path as built from the relative data directory
  const old = path.join('rel', path.relative(path.join(fs.realpathSync(dir), 'rel'), tokenizer));
  const db = new Database(path.join(dir, 'rel', DATABASE_FILE));
  db.prepare('UPDATE datasets SET tokenizer_file = ?').run(old);
  db.close();
  // another folder holding another file at that relative path: it is not taken
  const elsewhere = path.join(dir, 'elsewhere');
  fs.mkdirSync(path.join(elsewhere, path.dirname(old)), { recursive: true });
  fs.writeFileSync(path.join(elsewhere, old), '{"model": {"type": "WordLevel"}}');

  const stats = await runCli(['--data-dir', path.join(dir, 'rel'), 'data', 'stats', '--json'], { cwd: elsewhere });
  assert.equal(stats.code, 0, stats.stderr);
  assert.equal((JSON.parse(stats.stdout) as { datasets: { tokenizer: string }[] }).datasets[0]!.tokenizer, tokenizer);
  const sample = await runCli(['--data-dir', path.join(dir, 'rel'), 'data', 'sample', '--n', '1'], { cwd: elsewhere });
  assert.equal(sample.code, 0, sample.stderr);
  assert.match(sample.stdout, /^example 1: /);

  fs.rmSync(tokenizer);
  const missing = await runCli(['--data-dir', path.join(dir, 'rel'), 'data', 'sample', '--n', '1'], { cwd: elsewhere });
  assert.equal(missing.code, 1);
  assert.ok(missing.stderr.includes(`tokenizer ${tokenizer}: cannot read (ENOENT)`), missing.stderr);
  assert.ok(missing.stderr.includes(`tokenized with the tokenizer.json of sha256 ${tokenizerSha256}: put that file at ${tokenizer}`), missing.stderr);
});

/** A `cohort data prepare` of ~12 documents of 1 M characters, running until its first shards are written (long enough to be stopped there). */
async function preparingLargeCorpus(t: TestContext, dir: string): Promise<{ proc: Proc; args: string[] }> {
  const small = path.join(dir, 'small.txt');
  fs.writeFileSync(small, Array.from({ length: 50 }, (_, i) => `Sentence ${i} of the river text. The boats went down at dawn.`).join('\n\n'));
  const trained = await runCli(['--data-dir', path.join(dir, 'tok'), 'data', 'prepare', '--source', small, '--vocab-size', '150', '--max-seq-len', '32', '--json']);
  assert.equal(trained.code, 0, trained.stderr);
  const big = path.join(dir, 'big.txt');
  const para = 'The boats went down the river at dawn. Nobody on the bank knew why they had come.';
  fs.writeFileSync(big, Array.from({ length: Math.ceil((12 * MAX_DOCUMENT_CHARS) / para.length) }, () => para).join('\n\n'));
  const tokenizer = (JSON.parse(trained.stdout) as { tokenizer: string }).tokenizer;
  const args = ['--data-dir', path.join(dir, 'data'), 'data', 'prepare', '--source', big, '--tokenizer', tokenizer, '--max-seq-len', '32'];
  const proc = startProcess(t, [CLI, ...args]);
  await waitFor('a progress line with shards written', () => /tokenizing: .* [1-9]\d* tokens in shards/.test(proc.stderr), 120_000);
  return { proc, args };
}

test('Ctrl-C during cohort data prepare removes the partial shards and says so; stats then count no bytes', async (t) => {
  const dir = tmpDir(t);
  const { proc } = await preparingLargeCorpus(t, dir);
  proc.child.kill('SIGINT');
  assert.equal(await proc.exited, 1, proc.out());
  assert.match(proc.stderr, /stopped: the dataset was not completed and its partial shards were removed/);
  const stats = await runCli(['--data-dir', path.join(dir, 'data'), 'data', 'stats', '--json']);
  assert.deepEqual(JSON.parse(stats.stdout), { cacheBytes: 0, datasets: [] });
});

test('a second prepare of a dataset being prepared on the same data directory is refused and leaves the first one building', async (t) => {
  const dir = tmpDir(t);
  const { proc, args } = await preparingLargeCorpus(t, dir);
  // frozen while it holds its build: the second one runs now, whatever the machine's load
  proc.child.kill('SIGSTOP');
  const second = await runCli(args);
  proc.child.kill('SIGCONT');
  assert.equal(second.code, 1, second.stderr);
  assert.match(second.stderr, /^cohort: dataset \w+ \(.*big\.txt \(1 file\)\) is being prepared by another process on .* wait until it ends, then run this again to reuse it\n$/);
  // the first one goes on and completes
  assert.equal(await proc.exited, 0, proc.out());
  assert.match(proc.stdout, /^prepared dataset \w+: 12 documents/);
});

test('the shards of a killed prepare are removed by the next prepare (its build lock is free), not kept unread', async (t) => {
  const dir = tmpDir(t);
  const { proc } = await preparingLargeCorpus(t, dir);
  proc.child.kill('SIGKILL');
  await proc.exited;
  const data = path.join(dir, 'data');
  const orphaned = JSON.parse((await runCli(['--data-dir', data, 'data', 'stats', '--json'])).stdout) as { cacheBytes: number };
  assert.ok(orphaned.cacheBytes > 0, 'the killed prepare wrote shards');
  const next = await runCli(['--data-dir', data, 'data', 'prepare', '--max-documents', '2', '--vocab-size', '300', '--max-seq-len', '32', '--json']);
  assert.equal(next.code, 0, next.stderr);
  const stats = JSON.parse((await runCli(['--data-dir', data, 'data', 'stats', '--json'])).stdout) as { cacheBytes: number; datasets: { bytes: number }[] };
  assert.equal(stats.datasets.length, 1);
  assert.equal(stats.cacheBytes, stats.datasets[0]!.bytes);
});

test('a --tokenizer file is kept in the data directory: the dataset stays usable and reused after the user moves the file', async (t) => {
  const dir = tmpDir(t);
  const trained = await runCli(['--data-dir', path.join(dir, 'tok'), 'data', 'prepare', '--max-documents', '2', '--vocab-size', '300', '--json']);
  assert.equal(trained.code, 0, trained.stderr);
  const mine = path.join(dir, 'Downloads', 'tokenizer.json');
  fs.mkdirSync(path.dirname(mine));
  fs.copyFileSync((JSON.parse(trained.stdout) as { tokenizer: string }).tokenizer, mine);
  const data = path.join(dir, 'data');
  const args = ['--data-dir', data, 'data', 'prepare', '--max-documents', '2', '--max-seq-len', '32', '--json'];
  const prepared = await runCli([...args, '--tokenizer', mine]);
  assert.equal(prepared.code, 0, prepared.stderr);
  const first = JSON.parse(prepared.stdout) as { cacheKey: string; tokenizer: string; tokenizerSha256: string };
  assert.equal(first.tokenizer, path.join(data, 'data', 'tokenizers', `${first.tokenizerSha256}.json`));

  const moved = path.join(dir, 'elsewhere.json');
  fs.renameSync(mine, moved);
  const sample = await runCli(['--data-dir', data, 'data', 'sample', '--n', '1']);
  assert.equal(sample.code, 0, sample.stderr);
  const again = await runCli([...args, '--tokenizer', moved]);
  assert.equal(again.code, 0, again.stderr);
  assert.deepEqual((JSON.parse(again.stdout) as { reused: boolean; cacheKey: string }).reused, true);
});

test('cohort data sample without a prepared dataset says what to run', async (t) => {
  const dir = tmpDir(t);
  const r = await runCli(['--data-dir', dir, 'data', 'sample']);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /no prepared dataset .*run `cohort data prepare` first/);
});

test('cohort data stats and sample on a --data-dir that does not exist say so and create nothing (a mistyped path shows)', async (t) => {
  const dir = path.join(tmpDir(t), 'typo');
  const stats = await runCli(['--data-dir', dir, 'data', 'stats']);
  assert.equal(stats.code, 0, stats.stderr);
  assert.match(stats.stdout, /the data directory \S+typo does not exist/);
  const json = await runCli(['--data-dir', dir, 'data', 'stats', '--json']);
  assert.deepEqual(JSON.parse(json.stdout), { cacheBytes: 0, datasets: [] });
  const sample = await runCli(['--data-dir', dir, 'data', 'sample']);
  assert.equal(sample.code, 1);
  assert.match(sample.stderr, /the data directory \S+typo does not exist/);
  assert.equal(fs.existsSync(dir), false);
});

test('cohort data prepare --source <URL> downloads over HTTP, verifies --sha256 and reads the file', async (t) => {
  const dir = tmpDir(t);
  const body = Buffer.from(Array.from({ length: 40 }, (_, i) => `Paragraph ${i} is about the harbour. The ships came in at dawn. Nobody knew why.`).join('\n\n'));
  const server = http.createServer((_req, res) => res.writeHead(200, { 'Content-Length': body.length }).end(body));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/corpus/harbour.txt`;
  const sha = createHash('sha256').update(body).digest('hex');

  const bad = await runCli(['--data-dir', dir, 'data', 'prepare', '--source', url, '--sha256', 'f'.repeat(64)]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /checksum mismatch/);
  assert.equal(fs.existsSync(downloadPath(url, path.join(dir, 'downloads'))), false);

  const ok = await runCli(['--data-dir', dir, 'data', 'prepare', '--source', url, '--sha256', sha, '--vocab-size', '150', '--max-seq-len', '32']);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /prepared dataset \w+: 1 documents, 120 sentences/);
  assert.ok(fs.readFileSync(downloadPath(url, path.join(dir, 'downloads'))).equals(body));
});

test('cohort data prepare --source <URL> on a 64 MiB disk: refused with the default reserve (1 GiB kept free), prepared with --disk-reserve 8; a bad --disk-reserve exits 2', async (t) => {
  const disk = smallDisk(t, 64);
  if (disk === undefined) return t.skip('needs root on Linux to mount a small tmpfs');
  const dir = path.join(disk, 'data');
  const body = Buffer.from(Array.from({ length: 40 }, (_, i) => `Paragraph ${i} is about the lighthouse. The keeper slept at noon. Nobody minded.`).join('\n\n'));
  const server = http.createServer((_req, res) => res.writeHead(200, { 'Content-Length': body.length }).end(body));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/corpus/lighthouse.txt`;
  const prepare = ['--data-dir', dir, 'data', 'prepare', '--source', url, '--vocab-size', '150', '--max-seq-len', '32'];

  const refused = await runCli(prepare);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, new RegExp(`GET ${url}: the file is ${body.length} bytes, .* of them kept free\\)`));
  assert.match(refused.stderr, new RegExp(`${1024 ** 3} of them kept free`));

  const bad = await runCli([...prepare, '--disk-reserve', '-1']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--disk-reserve/);

  const ok = await runCli([...prepare, '--disk-reserve', '8']);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /prepared dataset \w+: 1 documents, 120 sentences/);
  assert.ok(fs.readFileSync(downloadPath(url, path.join(dir, 'downloads'))).equals(body));
});
