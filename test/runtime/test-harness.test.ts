// The test harness itself: a test file the runner terminates at its timeout takes the processes it
// started with it (no `t.after` runs then; left running, a file's `cohort run` children loaded the
// machine for every later file).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('a test file terminated at its timeout kills the processes it started', { timeout: 120_000 }, async (t) => {
  const pidFile = path.join(tmpDir(t), 'pid');
  // without NODE_TEST_CONTEXT, which would make the inner runner skip its files as a nested run
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-timeout=8000', 'test/fixtures/harness/hanging.test.ts'], { cwd: ROOT, env: { ...env, PID_FILE: pidFile }, encoding: 'utf8', timeout: 100_000 });
  assert.match(run.stdout, /timed out after 8000ms/, `the fixture was not terminated at its timeout: ${run.stdout}${run.stderr}`);
  const pid = Number(fs.readFileSync(pidFile, 'utf8'));
  assert.ok(pid > 0);
  for (let i = 0; i < 50 && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
  const left = alive(pid);
  if (left) process.kill(pid, 'SIGKILL');
  assert.equal(left, false, `process ${pid}, started by the terminated file, is still running`);
});
