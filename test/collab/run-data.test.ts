// Issue 16's acceptance on real `cohort` processes (loopback): a coordinator founds a run on a
// WikiText-layout .zip; two peers with empty data directories join by code, fetch the tokenizer and
// the shards from it, train and average; their stores then hold the coordinator's dataset.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { bundledCorpus, readBundledDocument } from '../../src/data/bundled-corpus.js';
import { writeZip } from '../helpers/archives.js';
import { runCli } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';
import { spawnCli, waitFor } from './processes.js';

const COMMON = ['--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info', '--target-batch-size', '24', '--refresh', '1', '--seq-len', '64', '--warmup-steps', '1', '--total-steps', '1000'];
const TRAIN = [...COMMON, '--batch-size', '4', '--max-epochs', '3', '--matchmaking-time', '2', '--averaging-timeout', '20', '--threads', '1'];

/** `wikitext-103-raw/wiki.train.raw` as WikiText-103 ships it: ` = Title = ` headings, one article per State of the Union address. */
function wikiTextZip(file: string, articles: number): void {
  const text = bundledCorpus()
    .files.slice(-articles)
    .map((f) => readBundledDocument(f))
    .map((d) => `\n = ${d.title} = \n\n${d.paragraphs.map((p) => ` ${p} \n`).join('\n')}`)
    .join('');
  writeZip(file, { 'wikitext-103-raw/wiki.train.raw': text, 'wikitext-103-raw/wiki.valid.raw': '\n = Valid = \n\n Held out . \n' });
}

interface Stats {
  datasets: Array<{ datasetId: string; tokenizerSha256: string; shards: number }>;
}

async function stats(dataDir: string): Promise<Stats> {
  const r = await runCli(['data', 'stats', '--json', '--data-dir', dataDir, '--log-level', 'error']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as Stats;
}

test('a coordinator founds a run on a WikiText .zip; two peers with empty data directories fetch its data by join code, train and average', { timeout: 300_000 }, async (t) => {
  const root = tmpDir(t);
  const zip = path.join(root, 'wikitext-103-raw-v1.zip');
  wikiTextZip(zip, 12);
  const coDir = path.join(root, 'coordinator');
  const co = spawnCli(t, ['run', '--coordinator', '--run-id', 'run-data-test', '--data-dir', coDir, '--data-source', zip, ...COMMON]);
  // the data is prepared (tokenizer trained, shards built) before the join code is printed
  const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 180_000);
  const [, datasetId, tokenizerSha256] = await waitFor(co, /founding run "run-data-test" with run parameters: .*; dataset ([0-9a-f]{64}), tokenizer sha256 ([0-9a-f]{64})/, 30_000, 'stderr');

  const dirs = ['a', 'b'].map((n) => path.join(root, n));
  const peers = dirs.map((dir) => spawnCli(t, ['run', '--join', code!, '--data-dir', dir, ...TRAIN]));
  const codes = await Promise.all(peers.map((p) => p.exited));
  // the coordinator and both peers advertised what they hold (records outlive the peers by minutes)
  const status = await runCli(['status', '--join', code!, '--json', '--wait', '5', '--log-level', 'error', '--data-dir', path.join(root, 'status')]);
  assert.equal(status.code, 0, status.stderr);
  const view = JSON.parse(status.stdout.trim().split('\n').at(-1)!) as { data: { datasetId: string; tokenizerSha256: string; holdersPerShard: number[] } | null };
  assert.equal(view.data?.datasetId, datasetId);
  assert.equal(view.data?.tokenizerSha256, tokenizerSha256);
  assert.ok(view.data !== null && view.data.holdersPerShard.length >= 1 && view.data.holdersPerShard.every((n) => n === 3), `each shard is held by the coordinator and both peers: ${status.stdout}`);
  co.child.kill('SIGTERM');
  assert.equal(await co.exited, 0, co.stderr.slice(-3000));
  for (const [i, p] of peers.entries()) {
    assert.equal(codes[i], 0, p.stderr.slice(-3000));
    assert.ok(p.stderr.includes(`adopting the swarm's run parameters`) && p.stderr.includes(`dataset ${datasetId!}, tokenizer sha256 ${tokenizerSha256!}`), `peer ${i} adopts the pinned data:\n${p.stderr.slice(0, 3000)}`);
    assert.match(p.stderr, /fetching dataset: [\d.]+ of [\d.]+ MB \(\d+%\), \d+\/\d+ shards, [\d.]+ MB\/s/, `peer ${i} shows its fetch progress:\n${p.stderr.slice(0, 4000)}`);
    assert.match(p.stderr, /fetched \d+ shard\(s\) of dataset/);
    assert.match(p.stderr, /Averaged gradients with 2 peers/, `peer ${i} never averaged with the other:\n${p.stderr.slice(-3000)}`);
    const held = await stats(dirs[i]!);
    assert.deepEqual(
      held.datasets.map((d) => [d.datasetId, d.tokenizerSha256]),
      [[datasetId, tokenizerSha256]],
      `peer ${i}'s store holds the coordinator's dataset and tokenizer`,
    );
  }
  const founded = await stats(coDir);
  assert.deepEqual(founded.datasets.map((d) => d.datasetId), [datasetId]);
  assert.ok(fs.existsSync(path.join(dirs[0]!, 'cohort.db')));
});

test('a joiner whose --cache-quota cannot hold one shard of the run’s data exits 1 with one line saying so, not a stack', { timeout: 180_000 }, async (t) => {
  const root = tmpDir(t);
  const zip = path.join(root, 'wikitext-103-raw-v1.zip');
  wikiTextZip(zip, 3);
  const co = spawnCli(t, ['run', '--coordinator', '--run-id', 'quota-test', '--data-dir', path.join(root, 'coordinator'), '--data-source', zip, ...COMMON]);
  const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 120_000);
  const joiner = await runCli(['run', '--join', code!, '--data-dir', path.join(root, 'joiner'), '--cache-quota', '0.001', ...TRAIN], { timeoutMs: 120_000 });
  assert.equal(joiner.code, 1, joiner.stderr.slice(-3000));
  assert.match(joiner.stderr, /\ncohort: cache quota of \d+ bytes cannot hold one shard of dataset [0-9a-f]{64} \(the smallest has \d+ bytes\): give a larger --cache-quota, or none to hold all of it\n/);
  assert.doesNotMatch(joiner.stderr, /\n\s+at /);
  co.child.kill('SIGTERM');
  assert.equal(await co.exited, 0, co.stderr.slice(-3000));
});
