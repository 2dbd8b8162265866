// `cohort run --join CODE --cache-quota MiB` on real processes (loopback): the coordinator serves a
// dataset three times the joiner's quota; the joiner fetches a subset that fits, trains, and swaps
// each shard it trained on for one it has not held, its store staying within the quota throughout.
import assert from 'node:assert/strict';
import path from 'node:path';
import test from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { DATABASE_FILE } from '../../src/store/index.js';
import { prepareManyShards } from '../helpers/datasets.js';
import { tmpDir } from '../helpers/tmp.js';
import { spawnCli, waitFor } from './processes.js';

const COMMON = ['--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info', '--target-batch-size', '24', '--refresh', '1', '--seq-len', '64', '--warmup-steps', '1', '--total-steps', '1000'];
const TRAIN = [...COMMON, '--batch-size', '4', '--max-epochs', '2', '--matchmaking-time', '2', '--averaging-timeout', '20', '--threads', '1'];

/** The shards a store holds now (seq → bytes), read on a connection of the test's own while the peer runs. */
function heldShards(dataDir: string): Map<number, number> {
  let db: BetterSqlite3.Database;
  try {
    db = new BetterSqlite3(path.join(dataDir, DATABASE_FILE), { readonly: true, fileMustExist: true });
  } catch {
    return new Map(); // the peer has not created its store yet
  }
  try {
    db.pragma('busy_timeout = 2000');
    const rows = db.prepare('SELECT seq, length(data) AS bytes FROM shards').all() as { seq: number; bytes: number }[];
    return new Map(rows.map((r) => [r.seq, r.bytes]));
  } catch {
    return new Map(); // not migrated yet: no shards table
  } finally {
    db.close();
  }
}

test('a joiner with --cache-quota holds at most its quota of a larger dataset, trains, and fetches shards beyond its first subset as it trains', { timeout: 480_000 }, async (t) => {
  const root = tmpDir(t);
  const coDir = path.join(root, 'coordinator');
  // small shards: the coordinator's dataset has many, and a quota of a third holds a few
  const info = await prepareManyShards(coDir);
  assert.ok(info.shardCount >= 9, `the dataset has ${info.shardCount} shards`);
  const quotaMiB = info.bytes / 3 / 2 ** 20;
  const quotaBytes = Math.floor(quotaMiB * 2 ** 20);

  // the founder pins the newest dataset in its store
  const co = spawnCli(t, ['run', '--coordinator', '--run-id', 'cache-quota-test', '--data-dir', coDir, ...COMMON]);
  const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 60_000);
  const [, datasetId] = await waitFor(co, /founding run "cache-quota-test" with run parameters: .*; dataset ([0-9a-f]{64})/, 30_000, 'stderr');
  assert.equal(datasetId, info.datasetId);

  const dir = path.join(root, 'joiner');
  const joiner = spawnCli(t, ['run', '--join', code!, '--data-dir', dir, '--cache-quota', String(quotaMiB), ...TRAIN]);
  // the store, sampled while the joiner runs: the most it held at once, and every shard it held at some point
  let most = 0;
  let mostShards = 0;
  const everHeld = new Set<number>();
  let firstSubset: Set<number> | undefined;
  const deadline = Date.now() + 400_000;
  while (joiner.child.exitCode === null && Date.now() < deadline) {
    const held = heldShards(dir);
    const bytes = [...held.values()].reduce((a, b) => a + b, 0);
    if (bytes > most) [most, mostShards] = [bytes, held.size];
    for (const seq of held.keys()) everHeld.add(seq);
    if (firstSubset === undefined && /fetched \d+ shard\(s\) of dataset/.test(joiner.stderr)) firstSubset = new Set(held.keys());
    await new Promise((r) => setTimeout(r, 100));
  }
  const exitCode = await joiner.exited;
  co.child.kill('SIGTERM');
  assert.equal(await co.exited, 0, co.stderr.slice(-3000));
  assert.equal(exitCode, 0, joiner.stderr.slice(-3000));

  assert.ok(most > 0 && most <= quotaBytes, `the joiner's store held at most ${most} bytes (${mostShards} shards), within the quota of ${quotaBytes}`);
  assert.ok(firstSubset !== undefined && firstSubset.size >= 1 && firstSubset.size < info.shardCount, `its first fetch is a subset: ${firstSubset?.size} of ${info.shardCount} shards`);
  const summary = JSON.parse(joiner.stdout.trim().split('\n').at(-1)!) as { role: string; epoch: number; steps: number; samples: number };
  assert.ok(summary.role === 'peer' && summary.epoch === 2 && summary.steps > 0 && summary.samples >= 48, `the joiner trained 2 epochs: ${joiner.stdout.slice(-500)}`);
  // the shards it trained on were swapped for others
  assert.match(joiner.stderr, /cache quota: dropped shard \d+ \(trained on\), fetched shard\(s\) \d+/, `the joiner swapped a shard it trained on:\n${joiner.stderr.slice(-3000)}`);
  const beyond = [...everHeld].filter((seq) => !firstSubset.has(seq));
  assert.ok(beyond.length >= 1, `shards held beyond the first subset ${[...firstSubset].join(',')}: ${beyond.join(',')}`);
  const finalHeld = heldShards(dir);
  assert.ok([...finalHeld.values()].reduce((a, b) => a + b, 0) <= quotaBytes);
});
