// `cohort metrics export` on a store filled through the store API, read back with a strict CSV parser.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { parse } from 'csv-parse/sync';
import { EXPORT_COLUMNS } from '../../src/collab/export.js';
import { METRIC } from '../../src/store/metric-series.js';
import { openStore } from '../../src/store/index.js';
import { CLI, cohortInProcess, runCli } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';

/** A display name that needs quoting in CSV: comma, quote, line break. */
const TRICKY = 'ada, "the first"\nprogrammer';
const HOUR = 3_600_000;

function filledStore(dir: string, now: number): void {
  const store = openStore(dir);
  store.metrics.record([
    { series: METRIC.loss, value: 6.25, epoch: 1, ts: now - 3 * HOUR },
    { series: METRIC.peersAlive, value: 2, epoch: 1, ts: now - 3 * HOUR },
    { series: METRIC.loss, value: 5.5, epoch: 2, ts: now - 60_000 },
    { series: METRIC.samplesPerSecond, value: 12.5, peer: 'p1', ts: now - 30_000 },
  ]);
  const baseline = { time: now, totalSamples: 0, epoch: 0, samplesInEpoch: 0, computeSeconds: 0 };
  store.contributions.credit({ runId: 'r1', peerId: 'p1', epoch: 0, displayName: TRICKY, claimed: 300, credited: 300, computeSeconds: 1800, ts: now - 3 * HOUR }, baseline);
  store.contributions.credit({ runId: 'r1', peerId: 'p1', epoch: 1, displayName: TRICKY, claimed: 60, credited: 60, computeSeconds: 360, ts: now - 60_000 }, baseline);
  store.contributions.credit({ runId: 'r1', peerId: 'p2', epoch: 1, claimed: 400, credited: 40, computeSeconds: 0, flag: 'claimed 400 samples', ts: now - 60_000 }, baseline);
  store.contributions.credit({ runId: 'r2', peerId: 'p3', epoch: 0, claimed: 5, credited: 5, computeSeconds: 0, ts: now - 60_000 }, baseline);
  store.close();
}

const csv = (text: string): Array<Record<string, string>> => parse<Record<string, string>>(text, { columns: true, record_delimiter: '\r\n' });

test('metrics export: every point as RFC 4180 CSV with display names; --series/--since/--out as JSON; contributions ranked', async (t) => {
  const dir = tmpDir(t);
  filledStore(dir, Date.now());

  const all = await runCli(['metrics', 'export', '--data-dir', dir, '--log-level', 'error']);
  assert.equal(all.code, 0, all.stderr);
  assert.ok(all.stdout.startsWith(`${EXPORT_COLUMNS.metrics.join(',')}\r\n`), all.stdout.slice(0, 80));
  const rows = csv(all.stdout);
  assert.deepEqual(rows.map((r) => [r.series, r.epoch, r.peer, Number(r.value)]), [
    ['loss', '1', '', 6.25],
    ['peers_alive', '1', '', 2],
    ['loss', '2', '', 5.5],
    ['samples_per_second', '', 'p1', 12.5],
  ]);
  assert.equal(rows[3]!.display_name, TRICKY);
  assert.equal(new Date(rows[0]!.time!).getTime(), Number(rows[0]!.ts));

  const out = path.join(dir, 'loss.json');
  const recent = await runCli(['metrics', 'export', '--format', 'json', '--series', 'loss', '--since', '1h', '--out', out, '--data-dir', dir, '--log-level', 'error']);
  assert.equal(recent.code, 0, recent.stderr);
  assert.equal(recent.stdout, '');
  const points = JSON.parse(fs.readFileSync(out, 'utf8')) as Array<Record<string, unknown>>;
  assert.deepEqual(points.map((p) => [p.series, p.epoch, p.value]), [['loss', 2, 5.5]]);
  assert.deepEqual(Object.keys(points[0]!), EXPORT_COLUMNS.metrics);

  const board = await runCli(['metrics', 'export', '--table', 'contributions', '--data-dir', dir, '--log-level', 'error']);
  assert.equal(board.code, 0, board.stderr);
  const peers = csv(board.stdout);
  assert.deepEqual(peers.map((p) => [p.run, p.rank, p.peer, p.display_name, Number(p.credited_samples), Number(p.claimed_samples), Number(p.compute_hours), Number(p.flagged_steps)]), [
    ['r1', '1', 'p1', TRICKY, 360, 360, 0.6, 0],
    ['r1', '2', 'p2', '', 40, 400, 0, 1],
    ['r2', '1', 'p3', '', 5, 5, 0, 0],
  ]);
  assert.deepEqual(peers.map((p) => Number(p.share)), [0.9, 0.1, 1], 'shares are within each run');
});

test('metrics export: a bad flag exits 2 naming the flag and what it accepts; a missing database exits 1', async (t) => {
  const dir = tmpDir(t);
  filledStore(dir, Date.now());
  const cases: Array<[string[], RegExp]> = [
    [['--format', 'xml'], /--format: invalid value "xml"; accepted: csv, json/],
    [['--table', 'peers'], /--table: invalid value "peers"; accepted: metrics, contributions/],
    [['--series', 'loss,nope'], /--series: invalid value "loss,nope" \(unknown: nope\); accepted: .*credited_samples.*peers_alive/],
    [['--since', 'yesterday'], /--since: invalid value "yesterday"; accepted: an ISO 8601 date\/time .* or a duration back from now/],
    [['--table', 'contributions', '--series', 'loss'], /--series: selects metric series, so it needs --table metrics/],
  ];
  for (const [args, message] of cases) {
    const r = await cohortInProcess(['metrics', 'export', ...args, '--data-dir', dir]);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message);
  }
  const empty = await cohortInProcess(['metrics', 'export', '--data-dir', path.join(dir, 'nothing-here')]);
  assert.equal(empty.code, 1);
  assert.match(empty.stderr, /no Cohort database in .*nothing-here/);
  assert.equal(fs.existsSync(path.join(dir, 'nothing-here')), false, 'the export created a data directory');
});

test('metrics export: a reader that stops early (`| head`) ends it quietly, exit 0; an --out it cannot write exits 2 saying why in one line, without a stack', async (t) => {
  const dir = tmpDir(t);
  const store = openStore(dir);
  // far more than a pipe holds, so the export is still writing when the reader goes
  store.metrics.record(Array.from({ length: 20_000 }, (_, i) => ({ series: METRIC.loss, value: i, epoch: i, ts: Date.now() - 60_000 })));
  store.close();
  const child = spawn(process.execPath, [CLI, 'metrics', 'export', '--data-dir', dir, '--log-level', 'error'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  await once(child.stdout, 'data');
  child.stdout.destroy();
  const [code] = (await once(child, 'close')) as [number | null];
  assert.equal(stderr, '');
  assert.equal(code, 0);

  const out = path.join(dir, 'no-such-folder', 'metrics.csv');
  const unwritable = await runCli(['metrics', 'export', '--data-dir', dir, '--out', out]);
  assert.equal(unwritable.code, 2, unwritable.stderr);
  assert.equal(unwritable.stderr, `cohort: --out: the folder ${path.dirname(out)} does not exist\n`);
});
