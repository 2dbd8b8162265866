import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { z } from 'zod';
import { CHECKPOINT_DATABASE_FILE, DATABASE_FILE, DataDirectoryInUseError, LOCK_FILE, openExistingStore, openStore, StoreError } from '../../src/store/index.js';
import { lockDataDirectory } from '../../src/store/data-dir-lock.js';
import { APPLICATION_ID } from '../../src/store/database.js';
import { MIGRATIONS } from '../../src/store/migrations.js';
import { migrate } from '../../src/store/sqlite-file.js';
import { CLI, runCli, startProcess } from '../helpers/cli.js';
import { waitFor } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

test('one node per data directory: a second exclusive open is refused, readers are not, and closing frees it', (t) => {
  const dir = tmpDir(t);
  const node = openStore(dir, { exclusive: true });
  assert.throws(() => openStore(dir, { exclusive: true }), (err: Error) => err instanceof DataDirectoryInUseError && err.message.includes(dir) && /another Cohort node/.test(err.message));
  // a command that only reads (data stats, metrics export) works beside the node, and sees its writes
  node.settings.set('probe', 'written by the node', z.string());
  const reader = openStore(dir);
  assert.equal(reader.settings.get('probe', z.string()), 'written by the node');
  reader.close();
  // the refused attempt left the node's lock and store as they were
  assert.throws(() => openStore(dir, { exclusive: true }), DataDirectoryInUseError);
  node.settings.set('probe', 'still writable', z.string());
  node.close();
  const next = openStore(dir, { exclusive: true });
  assert.equal(next.settings.get('probe', z.string()), 'still writable');
  next.close();
});

test('every file a node keeps in its data directory is its owner\'s alone (0600), the lock file too', { skip: process.platform === 'win32' }, (t) => {
  const dir = tmpDir(t);
  openStore(dir, { exclusive: true }).close();
  const files = fs.readdirSync(dir);
  assert.ok(files.includes(LOCK_FILE) && files.includes(DATABASE_FILE), files.join(', '));
  for (const f of files) assert.equal(fs.statSync(path.join(dir, f)).mode & 0o777, 0o600, f);
});

test('a data command with --move-aside leaves the files of a running node where they are', (t) => {
  const dir = tmpDir(t);
  const node = openStore(dir, { exclusive: true });
  t.after(() => node.close());
  // the checkpoints file turns unreadable under the running node (a disk fault, a stray write)
  const checkpoints = path.join(dir, CHECKPOINT_DATABASE_FILE);
  fs.writeFileSync(checkpoints, 'not a database');
  assert.throws(() => openStore(dir, { moveAside: true }), (err: Error) => err instanceof DataDirectoryInUseError && err.message.includes(checkpoints) && /not moved aside: stop that node, then pass --move-aside again/.test(err.message));
  assert.deepEqual(fs.readdirSync(dir).filter((name) => name.includes('.moved-')), []);
  assert.equal(fs.readFileSync(checkpoints, 'utf8'), 'not a database');
});

test('a data command does not upgrade the schema under an older node running on the directory; with none running it does', (t) => {
  const dir = tmpDir(t);
  // an older Cohort's database: every migration but the last
  const older = MIGRATIONS.at(-1)!.version - 1;
  const db = new BetterSqlite3(path.join(dir, DATABASE_FILE));
  db.pragma(`application_id = ${APPLICATION_ID}`);
  migrate(db, MIGRATIONS.filter((m) => m.version <= older));
  db.close();
  const version = () => {
    const check = new BetterSqlite3(path.join(dir, DATABASE_FILE), { readonly: true });
    t.after(() => check.close());
    return check.pragma('user_version', { simple: true });
  };
  const node = lockDataDirectory(dir); // the older node (a version that takes the lock)
  assert.throws(() => openStore(dir), (err: Error) => err instanceof DataDirectoryInUseError && err.message.includes(`${DATABASE_FILE} has schema version ${older}, which this Cohort would upgrade to ${older + 1}, and an older Cohort's node runs on ${dir}`));
  assert.equal(version(), older, 'left as it was');
  node.release();
  openStore(dir).close();
  assert.equal(version(), older + 1);
});

// another user's files need a second user: as root, the tests act as nobody while they open them
const NOBODY = 65534;
const AS_ROOT = { skip: process.getuid?.() !== 0 && 'needs root on POSIX to act as another user' };

function asNobody(fn: () => void): void {
  assert.ok(process.setegid && process.seteuid);
  process.setegid(NOBODY);
  process.seteuid(NOBODY);
  try {
    fn();
  } finally {
    process.seteuid(0);
    process.setegid(0);
  }
}

test('a node on a folder this user may not write says why, as the data commands do; its own folder left read-only is made 0700 again', AS_ROOT, (t) => {
  const foreign = tmpDir(t);
  const own = tmpDir(t);
  fs.chownSync(own, NOBODY, NOBODY);
  fs.chmodSync(own, 0o500);
  asNobody(() => {
    assert.throws(() => openStore(foreign, { exclusive: true }), (err: Error) => err instanceof StoreError && err.message.includes(`cannot use ${foreign} as the data directory (EPERM`) && /a folder this user can write/.test(err.message));
    openStore(own, { exclusive: true }).close();
  });
  assert.equal(fs.statSync(own).mode & 0o777, 0o700);
});

test('another user’s data directory (a service’s, 0700): the exports and data commands say to run them as its user, not that it has no database', AS_ROOT, (t) => {
  const dir = tmpDir(t);
  openStore(dir).close();
  const advice = /; run this command as the user it belongs to \(a service’s: that user, or root\)/;
  asNobody(() => {
    assert.throws(() => openExistingStore(dir), (err: Error) => err instanceof StoreError && err.message.startsWith(`cannot use ${dir} as the data directory (EACCES`) && advice.test(err.message));
    assert.throws(() => openStore(dir), (err: Error) => err instanceof StoreError && err.message.startsWith(`cannot use ${dir} as the data directory (EPERM`) && advice.test(err.message));
  });
});

test('a node.lock this user may not write (left by a node run with sudo) is refused, not taken as a lock that excludes no one', AS_ROOT, (t) => {
  const dir = tmpDir(t);
  fs.chownSync(dir, NOBODY, NOBODY);
  const lockFile = path.join(dir, LOCK_FILE);
  fs.writeFileSync(lockFile, '', { mode: 0o644 });
  asNobody(() => assert.throws(() => openStore(dir, { exclusive: true }), (err: Error) => err instanceof StoreError && err.message.includes(`this user may not write ${lockFile}`)));
});

test('a second cohort process on a running node\'s data directory exits 1 saying so; killing the node frees it at once', async (t) => {
  const dir = tmpDir(t);
  const first = startProcess(t, [CLI, 'swarm', 'start', '--data-dir', dir, '--run-id', 'lock-test', '--host-maddrs', '/ip4/127.0.0.1/tcp/0']);
  await waitFor('the first node to start', () => /Join code/.test(first.out()), 60_000);
  const second = await runCli(['swarm', 'start', '--data-dir', dir, '--run-id', 'lock-test', '--host-maddrs', '/ip4/127.0.0.1/tcp/0']);
  assert.equal(second.code, 1, second.stderr);
  assert.match(second.stderr, /is in use by another Cohort node/);
  assert.ok(second.stderr.includes(dir), second.stderr);
  // reading what the node keeps still works meanwhile
  const stats = await runCli(['data', 'stats', '--data-dir', dir]);
  assert.equal(stats.code, 0, stats.stderr);
  // an OS lock: a killed node leaves none behind
  first.child.kill('SIGKILL');
  await first.exited;
  const store = openStore(dir, { exclusive: true });
  store.close();
});
