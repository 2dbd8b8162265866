// `cohort --help` and usage errors must not load the runtimes the commands drive (libp2p, onnxruntime,
// SQLite): each costs seconds on a loaded machine, and the tests run `cohort` hundreds of times.
// src/cli/program.ts says how commands keep them out: flag tables import schemas only, actions
// `await import()` their runtime.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { ROOT, runCli, type CliResult } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';

const HEAVY = [/^libp2p$/, /^@libp2p\//, /^onnxruntime-node$/, /^better-sqlite3$/];
const RECORDER = pathToFileURL(path.join(ROOT, 'test', 'helpers', 'module-log.mjs')).href;

/** Runs `cohort args` with every module it loads recorded: its result and the npm packages among them. */
async function runRecorded(dir: string, args: readonly string[]): Promise<CliResult & { packages: Set<string> }> {
  const log = path.join(dir, `modules-${args.join('_').replace(/\W+/g, '-')}.txt`);
  fs.writeFileSync(log, '');
  const r = await runCli(args, { env: { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${RECORDER}`, COHORT_MODULE_LOG: log } });
  const packages = new Set([...fs.readFileSync(log, 'utf8').matchAll(/\/node_modules\/((?:@[^/\n]+\/)?[^/\n]+)\//g)].map((m) => m[1]!));
  return { ...r, packages };
}

const heavyAmong = (packages: Set<string>): string[] => [...packages].filter((p) => HEAVY.some((h) => h.test(p))).sort();

test('--help, an unknown flag and a bad flag value load no libp2p, onnxruntime or SQLite', async (t) => {
  const dir = tmpDir(t);
  for (const [args, code] of [
    [['--help'], 0],
    [['run', '--help'], 0],
    [['model', 'loss', '--bogus'], 2],
    [['run', '--target-batch-size', 'abc', '--data-dir', dir], 2],
    [['train', '--preset', 'tiny', '--steps', '0', '--data-dir', dir], 2],
    [['swarm', 'start', '--run-id', 'r', '--reachability', 'sometimes', '--data-dir', dir], 2],
  ] as const) {
    const r = await runRecorded(dir, args);
    assert.equal(r.code, code, `${args.join(' ')}: ${r.stderr}`);
    assert.ok(r.packages.has('commander'), `${args.join(' ')}: the recorder saw the CLI's own imports (${[...r.packages].join(', ')})`);
    assert.deepEqual(heavyAmong(r.packages), [], `cohort ${args.join(' ')} loaded them`);
  }
});

test('the recorder sees libp2p, onnxruntime and SQLite where a command loads them', async (t) => {
  const dir = tmpDir(t);
  // metrics export loads the collab front door (swarm and engine) and the store before it finds no store here
  const r = await runRecorded(dir, ['metrics', 'export', '--data-dir', dir]);
  assert.equal(r.code, 1, r.stderr);
  assert.deepEqual(
    HEAVY.map((h) => [...r.packages].some((p) => h.test(p))),
    HEAVY.map(() => true),
    `loaded: ${heavyAmong(r.packages).join(', ')}`,
  );
});
