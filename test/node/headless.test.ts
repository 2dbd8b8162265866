import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { Snapshot } from '../../src/shared/api.js';
import { waitFor } from '../collab/processes.js';
import { CLI, runCli, startProcess } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';

/** Starts `cohort start` on a free port; resolves with its URL once printed. */
async function startNode(t: TestContext, env: NodeJS.ProcessEnv = {}) {
  const proc = startProcess(t, [CLI, 'start', '--dashboard-port', '0', '--data-dir', tmpDir(t)], { env });
  const [, url] = await waitFor(proc, /Cohort dashboard: (http:\/\/127\.0\.0\.1:\d+)/, 30_000);
  return { child: proc.child, url: url! };
}

test('cohort start serves the API on loopback with training and the coordinator switch attached, and stops cleanly on SIGTERM', async (t) => {
  const { child, url } = await startNode(t);
  const snapshot = (await (await fetch(`${url}/api/getSnapshot`)).json()) as Pick<Snapshot, 'contribution' | 'coordinator'>;
  assert.equal(snapshot.contribution.phase, 'stopped');
  assert.equal((await fetch(`${url}/api/nope`)).status, 404);
  assert.equal(snapshot.coordinator.available, true, 'the node has its training parts, so the coordinator switch is available');
  const metrics = await fetch(`${url}/metrics`);
  assert.equal(metrics.status, 200);
  assert.match(await metrics.text(), /^# TYPE cohort_training_epoch gauge$/m);

  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  assert.equal(await exit, 0);
});

test('cohort start refuses a non-loopback dashboard address without a token, naming the flag to use', async (t) => {
  const r = await runCli(['start', '--dashboard-host', '0.0.0.0', '--data-dir', tmpDir(t)]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /beyond loopback needs an access token; pass --dashboard-token/);
});

test('a dashboard token that is too short is a usage error naming the flag', async (t) => {
  const r = await runCli(['start', '--dashboard-token', 'short', '--data-dir', tmpDir(t)]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--dashboard-token: invalid value "short"/);
});

test('with COHORT_DASHBOARD_TOKEN the API needs the token', async (t) => {
  const token = 'env-token-abcdef0123456789';
  const { url } = await startNode(t, { COHORT_DASHBOARD_TOKEN: token });
  assert.equal((await fetch(`${url}/api/getSnapshot`)).status, 401);
  assert.equal((await fetch(`${url}/api/getSnapshot`, { headers: { authorization: `Bearer ${token}` } })).status, 200);
});
