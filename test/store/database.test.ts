import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { z } from 'zod';
import { readShardOffThread } from '../../src/shards/shard-io.js';
import { CHECKPOINT_APPLICATION_ID, openCheckpointDatabase } from '../../src/store/checkpoint-database.js';
import { APPLICATION_ID, DATABASE_FILE, openDatabase } from '../../src/store/database.js';
import { CHECKPOINT_DATABASE_FILE, CorruptDatabaseError, ForeignDatabaseError, NewerSchemaError, StoreError, openStore } from '../../src/store/index.js';
import { MIGRATIONS } from '../../src/store/migrations.js';
import { migrate, type Migration } from '../../src/store/sqlite-file.js';
import { ROOT } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';

/** The version the newest migration brings a database to. */
const SCHEMA_VERSION = MIGRATIONS.at(-1)!.version;

const tablesOf = (db: BetterSqlite3.Database): string[] => (db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").all() as Array<{ name: string }>).map((r) => r.name);

test('a new store is created with WAL, the Cohort application id and every migration; checkpoints in a rollback-journaled file of their own', (t) => {
  const dir = tmpDir(t);
  const store = openStore(dir);
  t.after(() => store.close());
  assert.equal(store.db.pragma('journal_mode', { simple: true }), 'wal');
  assert.equal(store.db.pragma('application_id', { simple: true }), APPLICATION_ID);
  assert.equal(store.db.pragma('user_version', { simple: true }), SCHEMA_VERSION);
  const tables = tablesOf(store.db);
  for (const table of ['metrics', 'peers', 'settings', 'shards']) assert.ok(tables.includes(table), `table ${table}`);
  assert.ok(!tables.includes('checkpoints') && !tables.includes('checkpoint_chunks'), `cohort.db holds no checkpoint tables: ${tables.join(', ')}`);
  assert.equal(store.checkpoints.file, path.join(dir, CHECKPOINT_DATABASE_FILE));
  assert.equal(store.checkpoints.db.pragma('journal_mode', { simple: true }), 'truncate');
  assert.equal(store.checkpoints.db.pragma('synchronous', { simple: true }), 2, 'FULL: a rollback journal needs it to survive power loss');
  assert.equal(store.checkpoints.db.pragma('application_id', { simple: true }), CHECKPOINT_APPLICATION_ID);
  assert.deepEqual(tablesOf(store.checkpoints.db), ['checkpoint_chunks', 'checkpoints']);
});

test('migration 6 moves the checkpoints an older version kept in cohort.db into checkpoints.db, ids and bytes kept, also after a kill between its two commits', (t) => {
  const dir = tmpDir(t);
  // the layout of schema 5: checkpoints in cohort.db, written the way that version's store wrote them
  const old = new BetterSqlite3(path.join(dir, DATABASE_FILE));
  old.pragma(`application_id = ${APPLICATION_ID}`);
  migrate(old, MIGRATIONS.filter((m) => m.version <= 5));
  const blob = Buffer.alloc(5000).map((_, i) => (i * 13) & 0xff);
  const add = old.prepare("INSERT INTO checkpoints (id, kind, epoch, created_at, size, sha256, chunk_count, meta) VALUES (?, 'state', ?, 1, ?, ?, 2, '{\"runId\":\"r\"}')");
  const chunk = old.prepare('INSERT INTO checkpoint_chunks (checkpoint_id, seq, data) VALUES (?, ?, ?)');
  const sha = createHash('sha256').update(blob).digest('hex');
  for (const [id, epoch] of [[3, 7], [5, 9]] as const) {
    add.run(id, epoch, blob.byteLength, sha);
    chunk.run(id, 0, blob.subarray(0, 4000));
    chunk.run(id, 1, blob.subarray(4000));
  }
  // as a process killed after the copy into checkpoints.db committed and before cohort.db's drop left it: checkpoint 3 is already there
  const copied = openCheckpointDatabase(dir);
  for (const r of old.prepare('SELECT * FROM checkpoints WHERE id = 3').all()) copied.prepare('INSERT INTO checkpoints (id, kind, epoch, created_at, size, sha256, chunk_count, meta) VALUES (@id, @kind, @epoch, @created_at, @size, @sha256, @chunk_count, @meta)').run(r);
  for (const c of old.prepare('SELECT checkpoint_id, seq, data FROM checkpoint_chunks WHERE checkpoint_id = 3').all()) copied.prepare('INSERT INTO checkpoint_chunks (checkpoint_id, seq, data) VALUES (@checkpoint_id, @seq, @data)').run(c);
  copied.close();
  old.close();

  const store = openStore(dir);
  t.after(() => store.close());
  assert.equal(store.db.pragma('user_version', { simple: true }), SCHEMA_VERSION);
  assert.ok(!tablesOf(store.db).includes('checkpoints'), 'the old tables are dropped');
  assert.deepEqual(store.checkpoints.list('state').map((c) => [c.id, c.epoch, c.meta['runId']]), [[5, 9, 'r'], [3, 7, 'r']]);
  for (const id of [3, 5]) assert.deepEqual(store.checkpoints.load(id).data, blob);
  assert.equal(store.checkpoints.db.prepare('SELECT count(*) FROM checkpoint_chunks').pluck().get(), 4, 'the copy made before the kill is not doubled');
  assert.equal(store.checkpoints.save({ kind: 'state', epoch: 10, data: blob }).id, 6, 'new ids follow the moved ones');
});

test('the data directory is 0700 and the database 0600 (it holds the private key), an older looser one tightened on open', { skip: process.platform === 'win32' && 'POSIX modes' }, (t) => {
  const mode = (p: string): number => fs.statSync(p).mode & 0o777;
  const dir = path.join(tmpDir(t), 'data');
  const store = openStore(dir);
  store.metrics.record([{ series: 'loss', value: 1 }]);
  store.checkpoints.save({ kind: 'model', epoch: 1, data: new Uint8Array(10) });
  const file = path.join(dir, DATABASE_FILE);
  const checkpoints = path.join(dir, CHECKPOINT_DATABASE_FILE);
  assert.deepEqual([mode(dir), mode(file), mode(`${file}-wal`), mode(checkpoints), mode(`${checkpoints}-journal`)], [0o700, 0o600, 0o600, 0o600, 0o600]);
  store.close();
  // what earlier versions left: umask 022 modes
  fs.chmodSync(dir, 0o755);
  fs.chmodSync(file, 0o644);
  fs.chmodSync(checkpoints, 0o644);
  const reopened = openStore(dir);
  t.after(() => reopened.close());
  assert.deepEqual([mode(dir), mode(file), mode(checkpoints)], [0o700, 0o600, 0o600]);
  assert.deepEqual(reopened.metrics.query('loss').map((m) => m.value), [1]);
});

test('reopening keeps data and applies no migration twice', (t) => {
  const dir = tmpDir(t);
  const first = openStore(dir);
  first.metrics.record([{ series: 'loss', value: 2.5, ts: 1 }]);
  first.close();
  const second = openStore(dir);
  t.after(() => second.close());
  assert.deepEqual(second.metrics.query('loss').map((m) => m.value), [2.5]);
  assert.deepEqual(migrate(second.db, MIGRATIONS), []);
});

test('migrations run in order, each in its own transaction, and a failing one changes nothing', (t) => {
  const db = new BetterSqlite3(path.join(tmpDir(t), 'm.db'));
  t.after(() => db.close());
  const steps: Migration[] = [
    { version: 1, description: 'a', up: (d) => d.exec('CREATE TABLE a (x)') },
    { version: 2, description: 'b', up: (d) => d.exec('CREATE TABLE b (x)') },
  ];
  assert.deepEqual(migrate(db, steps.slice(0, 1)), [1]);
  assert.deepEqual(migrate(db, steps), [2]);
  assert.equal(db.pragma('user_version', { simple: true }), 2);
  const broken: Migration = { version: 3, description: 'broken', up: (d) => d.exec('CREATE TABLE c (x); CREATE TABLE c (x)') };
  assert.throws(() => migrate(db, [...steps, broken]), /already exists/);
  assert.equal(db.pragma('user_version', { simple: true }), 2);
  assert.equal((db.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE name = 'c'").get() as { n: number }).n, 0);
});

test('the released migration list is strictly increasing', () => {
  MIGRATIONS.forEach((m, i) => assert.equal(m.version, i + 1));
});

test('a corrupt database file gives a clear error and is left untouched', (t) => {
  const dir = tmpDir(t);
  const file = path.join(dir, DATABASE_FILE);
  const garbage = Buffer.from('this is not an sqlite database, just some bytes '.repeat(200));
  fs.writeFileSync(file, garbage);
  assert.throws(() => openStore(dir), (err: unknown) => {
    assert.ok(err instanceof CorruptDatabaseError);
    assert.equal(err.file, file);
    assert.match(err.message, /not a readable Cohort database.*--move-aside/);
    return true;
  });
  assert.deepEqual(fs.readFileSync(file), garbage);
});

test('a --data-dir that is a file (or lies under one) is a StoreError naming it, and the file is left untouched', (t) => {
  const dir = tmpDir(t);
  const file = path.join(dir, 'notes.txt');
  fs.writeFileSync(file, 'not a folder');
  for (const dataDir of [file, path.join(file, 'cohort')]) {
    assert.throws(() => openStore(dataDir), (err: unknown) => {
      assert.ok(err instanceof StoreError, String(err));
      assert.match(err.message, new RegExp(`^cannot use ${dataDir} as the data directory \\(E(EXIST|NOTDIR).*\\); pass --data-dir a folder`));
      return true;
    });
  }
  assert.equal(fs.readFileSync(file, 'utf8'), 'not a folder');
});

test('a database with a damaged page is reported as corrupt', (t) => {
  const dir = tmpDir(t);
  const store = openStore(dir);
  store.metrics.record(Array.from({ length: 2000 }, (_, i) => ({ series: 'loss', value: i, ts: i })));
  store.db.pragma('wal_checkpoint(TRUNCATE)');
  store.close();
  const file = path.join(dir, DATABASE_FILE);
  const bytes = fs.readFileSync(file);
  bytes.fill(0xff, 0, 100); // the header: SQLite no longer recognises the file
  fs.writeFileSync(file, bytes);
  assert.throws(() => openStore(dir), CorruptDatabaseError);
});

test('--move-aside renames a corrupt database (with its WAL) and starts afresh', (t) => {
  const dir = tmpDir(t);
  const file = path.join(dir, DATABASE_FILE);
  fs.writeFileSync(file, 'garbage'.repeat(1000));
  fs.writeFileSync(file + '-wal', 'wal garbage');
  let movedTo = '';
  const store = openStore(dir, { moveAside: true, onMovedAside: (to) => (movedTo = to) });
  t.after(() => store.close());
  assert.match(path.basename(movedTo), /^cohort\.db\.moved-/);
  assert.equal(fs.readFileSync(movedTo, 'utf8'), 'garbage'.repeat(1000));
  assert.equal(fs.readFileSync(movedTo + '-wal', 'utf8'), 'wal garbage');
  assert.equal(store.db.pragma('user_version', { simple: true }), SCHEMA_VERSION);
});

test('a foreign SQLite database is refused, not migrated', (t) => {
  const dir = tmpDir(t);
  const file = path.join(dir, DATABASE_FILE);
  const other = new BetterSqlite3(file);
  other.exec('CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices (total) VALUES (12.5)');
  other.close();
  assert.throws(() => openDatabase(dir), (err: unknown) => err instanceof ForeignDatabaseError && /did not create/.test(err.message));
  const check = new BetterSqlite3(file, { readonly: true });
  t.after(() => check.close());
  assert.equal(check.pragma('user_version', { simple: true }), 0);
  assert.deepEqual(check.prepare('SELECT total FROM invoices').all(), [{ total: 12.5 }]);
});

test('a database from a newer Cohort is refused', (t) => {
  const dir = tmpDir(t);
  const store = openStore(dir);
  store.db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
  store.close();
  assert.throws(() => openStore(dir), (err: unknown) => err instanceof NewerSchemaError && /newer than this Cohort/.test(err.message));
});

/**
 * Whether another process could take `file` for itself: a connection in EXCLUSIVE locking mode gets
 * the file's exclusive lock only when no connection of any other process holds a lock on it. Such a
 * process (an sqlite3 shell, a backup tool) that got it deletes the WAL when it closes.
 */
function anotherProcessGetsExclusive(file: string): boolean {
  const script = `const D = require('better-sqlite3'); const db = new D(${JSON.stringify(file)}, { timeout: 0 }); db.pragma('locking_mode = EXCLUSIVE');
    try { db.prepare('SELECT count(*) FROM sqlite_schema').get(); process.stdout.write('exclusive'); } catch (e) { process.stdout.write(String(e.code)); } finally { db.close(); }`;
  const out = execFileSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8' });
  assert.ok(out === 'exclusive' || out === 'SQLITE_BUSY', `the other process answered ${out}`);
  return out === 'exclusive';
}

test('a worker thread’s own connection to the open store leaves this process’s locks in place: another process cannot take the file and delete the WAL under it', async (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  store.settings.set('probe', 1, z.number());
  assert.equal(anotherProcessGetsExclusive(store.file), false, 'the store’s connection holds its lock');
  // the shard store's worker opens its own connection to the file (as the data stream's worker does)
  assert.equal(await readShardOffThread(store, 'a'.repeat(64)), undefined);
  assert.equal(anotherProcessGetsExclusive(store.file), false, 'the locks are still held once a worker opened the file too');
  assert.ok(fs.existsSync(`${store.file}-wal`), 'the WAL is where it was');
  store.settings.set('probe', 2, z.number());
  assert.equal(store.settings.get('probe', z.number()), 2);
});
