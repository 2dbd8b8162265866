// The headless node installs like a server tool: `npm pack`'s tarball, installed globally into a
// temporary prefix with production dependencies only, runs the compiled CLI (no tsx, no sources):
// `cohort doctor`, `cohort run --help`, a `cohort train` step (its onnxruntime worker thread),
// `cohort start` serving the built dashboard, and
// `cohort run --coordinator --metrics-port` serving /metrics a strict exposition-format parser accepts.
//
// Kept fast and off the network as far as npm allows: `--prefer-offline` takes every tarball from the
// cache `npm ci` filled (it asks the registry only for package metadata the cache lacks, i.e. on a
// fresh machine's first run); onnxruntime-node's CUDA download is skipped (ONNXRUNTIME_NODE_INSTALL);
// better-sqlite3 installs this checkout's compiled addon as a local prebuild instead of compiling SQLite.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT, startProcess } from '../helpers/cli.js';
import { metricsUrl, scrape } from '../helpers/prometheus.js';
import { waitFor } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

const TEN_MINUTES = 600_000;
const TOKEN = 'package-test-token-0123456789';

/** Runs a command to completion (bounded), failing the test with its output when it fails. */
function run(command: string, args: readonly string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): string {
  const r = spawnSync(command, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, encoding: 'utf8', timeout: TEN_MINUTES });
  assert.equal(r.status, 0, `${command} ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/**
 * Puts this checkout's compiled better-sqlite3 addon where prebuild-install (its install script) looks
 * for a local prebuild, named as it names its downloads, and points it there with a config file in `dir`.
 */
function localSqlitePrebuild(dir: string): void {
  const pkgDir = path.dirname(createRequire(import.meta.url).resolve('better-sqlite3/package.json'));
  const { version } = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')) as { version: string };
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  run('tar', ['czf', path.join(dir, name), 'build/Release/better_sqlite3.node'], { cwd: pkgDir });
  // rc (prebuild-install's config reader) finds .prebuild-installrc in the install's parent directories
  fs.writeFileSync(path.join(dir, '.prebuild-installrc'), `local-prebuilds=${dir}\n`);
}

test('npm pack’s tarball installs globally with --omit=dev and runs the compiled CLI: doctor, run --help, train, start, run --coordinator with /metrics', async (t) => {
  const dir = tmpDir(t, 'cohort-pack-');
  const tarball = path.join(dir, run('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: ROOT }).trim().split('\n').at(-1)!);
  localSqlitePrebuild(dir);
  const prefix = path.join(dir, 'prefix');
  run('npm', ['install', '--global', '--prefix', prefix, '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund', tarball], { cwd: dir, env: { ONNXRUNTIME_NODE_INSTALL: 'skip', ELECTRON_SKIP_BINARY_DOWNLOAD: '1' } });

  const installed = path.join(prefix, 'lib', 'node_modules', 'cohort');
  assert.equal(fs.existsSync(path.join(installed, 'src')), false, 'the package ships no sources');
  for (const dev of ['tsx', 'electron', 'typescript']) assert.equal(fs.existsSync(path.join(installed, 'node_modules', dev)), false, `${dev} (a dev dependency) is not installed`);
  const bin = path.join(prefix, 'bin', 'cohort');
  const env = { COHORT_DATA_DIR: path.join(dir, 'data') };

  const doctor = JSON.parse(run(bin, ['doctor', '--json'], { cwd: dir, env })) as { ok: boolean; checks: Array<{ name: string; status: string }> };
  assert.equal(doctor.ok, true, JSON.stringify(doctor));
  const status = Object.fromEntries(doctor.checks.map((c) => [c.name, c.status]));
  assert.deepEqual([status['onnxruntime-node'], status['SQLite']], ['ok', 'ok'], JSON.stringify(doctor));
  assert.match(run(bin, ['run', '--help'], { cwd: dir, env }), /--coordinator[\s\S]*--metrics-port <port>/);
  // a training step runs onnxruntime in its worker thread, which must load from the compiled output too
  const trained = JSON.parse(run(bin, ['train', '--preset', 'tiny', '--steps', '1', '--data', 'synthetic'], { cwd: dir, env }).trim().split('\n').at(-1)!) as { steps: number; loss: number };
  assert.equal(trained.steps, 1);
  assert.ok(Number.isFinite(trained.loss), JSON.stringify(trained));

  const start = startProcess(t, [bin, 'start', '--dashboard-port', '0'], { cwd: dir, env });
  await waitFor('the dashboard URL', () => /Cohort dashboard: http:\/\/\S+/.test(start.out()), 60_000);
  const page = await fetch(/Cohort dashboard: (http:\/\/\S+)/.exec(start.out())![1]!);
  assert.equal(page.status, 200);
  assert.match(await page.text(), /<script type="module"[^>]* src="\.?\/assets\/index-[\w-]+\.js"/, 'the built dashboard, not the "not built" page');
  assert.equal(await start.stop(), 0, start.out());

  const coordinator = startProcess(t, [bin, 'run', '--coordinator', '--listen', '/ip4/127.0.0.1/tcp/0', '--metrics-port', '0', '--metrics-token', TOKEN], { cwd: dir, env });
  const families = await scrape(await metricsUrl(coordinator), TOKEN);
  assert.ok(['cohort_swarm_connected_peers', 'cohort_training_epoch', 'process_cpu_seconds_total'].every((name) => families.has(name)), [...families.keys()].join(' '));
  assert.equal(await coordinator.stop(), 0, coordinator.out());
});
