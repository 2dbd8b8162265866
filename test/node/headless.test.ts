import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { CLI, ROOT, runCli } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';

test('cohort start serves the status API on loopback, says what is not built yet, and stops cleanly on SIGTERM', async (t) => {
  const dataDir = tmpDir(t);
  const child = spawn(process.execPath, [CLI, 'start', '--dashboard-port', '0', '--data-dir', dataDir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => child.kill('SIGKILL'));
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`no dashboard URL printed; stderr: ${stderr}`)), 30_000);
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /Cohort dashboard: (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
  });
  const status = (await (await fetch(`${url}/api/status`)).json()) as { components: Array<{ name: string; available: boolean }> };
  assert.equal(status.components.find((c) => c.name === 'store')?.available, true);
  const page = await (await fetch(url)).text();
  assert.match(page, /Cohort node/);
  assert.equal((await fetch(`${url}/nope`)).status, 404);
  assert.match(stderr, /not in this version yet/, 'missing parts are announced in the log');

  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  assert.equal(await exit, 0);
});

test('cohort start refuses a non-loopback dashboard address without a token', async (t) => {
  const r = await runCli(['start', '--dashboard-host', '0.0.0.0', '--data-dir', tmpDir(t)]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /beyond loopback needs an access token/);
});
