// SIGHUP (the terminal of `cohort run` closed, an SSH session dropped) stops a node as SIGTERM does:
// a real `cohort run --coordinator` child process, hung up by a signal and by a terminal that closes.
// Started by `npx`, a SIGTERM to npx stops it too.
import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { CLI, ROOT, startProcess } from '../helpers/cli.js';
import { waitFor } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

const PYTHON = process.env.COHORT_PYTHON ?? '/usr/bin/python3';
const hasPty = spawnSync(PYTHON, ['-c', 'import pty'], { timeout: 30_000 }).status === 0;

const COORDINATOR = ['run', '--coordinator', '--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info'];
const FOUNDED = /founding run "/;

test('a SIGHUPed `cohort run --coordinator` stops cleanly (summary printed, exit 0); a repeated SIGHUP does not cut the stop short', { timeout: 120_000 }, async (t) => {
  const dir = tmpDir(t);
  const co = startProcess(t, [CLI, ...COORDINATOR, '--run-id', 'hangup', '--data-dir', dir]);
  await waitFor('the coordinator to found its run', () => FOUNDED.test(co.stderr) || co.child.exitCode !== null, 60_000);
  // the shell and the kernel may each send one when a terminal closes
  co.child.kill('SIGHUP');
  co.child.kill('SIGHUP');
  const code = await co.exited;
  assert.equal(co.child.signalCode, null, co.stderr.slice(-2000));
  assert.equal(code, 0, co.stderr.slice(-2000));
  assert.equal((JSON.parse(co.stdout.trim().split('\n').at(-1)!) as { role: string }).role, 'coordinator');
  assert.doesNotMatch(co.stderr, /second signal/);
});

// A pty whose master side closes: the kernel hangs up the session (SIGHUP), and every later write to
// the terminal fails with EIO. Prints the child's exit as JSON.
const HANG_UP = `
import json, os, pty, re, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:-1])
seen, deadline = b'', time.time() + 90
while time.time() < deadline and not re.search(sys.argv[-1].encode(), seen):
    if select.select([fd], [], [], 1)[0]:
        try: seen += os.read(fd, 65536)
        except OSError: break
os.close(fd)
_, status = os.waitpid(pid, 0)
print(json.dumps({'code': os.WEXITSTATUS(status) if os.WIFEXITED(status) else None, 'signal': os.WTERMSIG(status) if os.WIFSIGNALED(status) else None, 'seen': seen.decode(errors='replace')[-2000:]}))
`;

test('a `cohort run --coordinator` whose terminal closes stops cleanly and exits 0, its store closed', { timeout: 120_000, skip: hasPty ? false : `${PYTHON} has no pty module` }, async (t) => {
  const dir = tmpDir(t);
  const { stdout } = await promisify(execFile)(PYTHON, ['-c', HANG_UP, process.execPath, CLI, ...COORDINATOR, '--run-id', 'terminal-closed', '--data-dir', dir, FOUNDED.source], { timeout: 110_000 });
  const exit = JSON.parse(stdout) as { code: number | null; signal: number | null; seen: string };
  assert.match(exit.seen, FOUNDED, 'it had founded its run when the terminal closed');
  // not killed by the hangup (signal 1), nor by an EIO writing its log (exit 1), nor at exit restoring the terminal (SIGABRT/SIGSEGV)
  assert.deepEqual([exit.code, exit.signal], [0, null], exit.seen);
  // a store closed by its owner leaves no write-ahead log behind; a killed one does
  assert.ok(!fs.existsSync(path.join(dir, 'cohort.db-wal')), 'cohort.db-wal left: the store was not closed');
});

/** Pids of processes whose command line names `dir` (a node left running, found to be stopped). */
function processesNaming(dir: string): number[] {
  return fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e)).filter((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir);
    } catch {
      return false; // exited meanwhile
    }
  }).map(Number);
}

test('`npx cohort run --coordinator` sent SIGTERM (to npx: npm and its shell end, the signal never reaches node) stops cleanly too, its store closed', { timeout: 180_000, skip: process.platform === 'linux' ? false : 'reads /proc' }, async (t) => {
  const dir = tmpDir(t);
  const npx = spawn('npx', ['cohort', ...COORDINATOR, '--run-id', 'npx-term', '--data-dir', dir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => processesNaming(dir).forEach((pid) => process.kill(pid, 'SIGKILL')));
  let stdout = '';
  let stderr = '';
  npx.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  npx.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  // every holder of the pipes gone: npx, npm's shell and the node under it
  const closed = new Promise<void>((resolve) => npx.on('close', () => resolve()));
  await waitFor('the coordinator to found its run', () => FOUNDED.test(stderr) || npx.exitCode !== null, 90_000);
  assert.match(stderr, FOUNDED, stderr.slice(-2000));
  assert.ok(processesNaming(dir).length >= 2, 'npx and a node under it run');
  npx.kill('SIGTERM');
  await Promise.race([closed, new Promise((r) => setTimeout(r, 60_000))]);
  assert.deepEqual(processesNaming(dir), [], `a process outlived npx: ${stderr.slice(-2000)}`);
  assert.equal((JSON.parse(stdout.trim().split('\n').at(-1)!) as { role: string }).role, 'coordinator', stdout);
  assert.ok(!fs.existsSync(path.join(dir, 'cohort.db-wal')), 'cohort.db-wal left: the store was not closed');
});
