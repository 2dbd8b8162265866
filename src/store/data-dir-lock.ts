import fs from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { DataDirectoryInUseError, StoreError, type UnusableDatabaseError } from './errors.js';
import { ownDataDirectory } from './sqlite-file.js';

/** The file whose lock marks a data directory as some process's node. */
export const LOCK_FILE = 'node.lock';

export interface DataDirectoryLock {
  release(): void;
}

/**
 * Makes this process the only node of `dataDir` until `release`: two nodes on one directory would
 * share one peer identity in the swarm (their progress records overwrite each other's) and write the
 * same checkpoints and metrics. The lock is SQLite's exclusive lock on an empty file, an OS lock the
 * system drops when the process dies however it ends (a killed node leaves no stale lock to clear) and
 * that SQLite keeps right between connections of one process. Only SQLite opens the file: a
 * descriptor of it opened and closed beside the lock would drop it (POSIX).
 * Throws DataDirectoryInUseError when another node holds it.
 */
export function lockDataDirectory(dataDir: string): DataDirectoryLock {
  const file = path.join(dataDir, LOCK_FILE);
  ownDataDirectory(dataDir, file);
  let db: BetterSqlite3.Database;
  try {
    db = new BetterSqlite3(file, { timeout: 0 });
  } catch (err) {
    throw new StoreError(file, `cannot open the lock file ${file}: ${(err as Error).message}`, { cause: err });
  }
  let lock: DataDirectoryLock;
  try {
    lock = lockConnection(db);
  } catch (err) {
    const code = String((err as { code?: string }).code);
    if (code === 'SQLITE_BUSY') {
      throw new DataDirectoryInUseError(file, `the data directory ${dataDir} is in use by another Cohort node (cohort run, cohort start, cohort swarm start, cohort train or the desktop app): stop that one first, or give this one another --data-dir`, { cause: err });
    }
    if (code.startsWith('SQLITE_READONLY')) {
      throw new StoreError(file, `cannot lock the data directory ${dataDir}: this user may not write ${file} (a node run as another user, with sudo say, left it): remove that file while no node runs, or give this one another --data-dir`, { cause: err });
    }
    throw new StoreError(file, `cannot lock the data directory ${dataDir} (${file}): ${(err as Error).message}`, { cause: err });
  }
  // SQLite creates it 0644; the data directory's files are its owner's alone, as the databases are
  // (a chmod opens no descriptor, so the lock stays)
  try {
    if (process.platform !== 'win32') fs.chmodSync(file, 0o600);
  } catch (err) {
    lock.release();
    throw new StoreError(file, `cannot make ${file} this user's alone (${(err as Error).message}): remove that file while no node runs, or give this one another --data-dir`, { cause: err });
  }
  return lock;
}

/**
 * Takes SQLite's exclusive lock on the file `db` has open, held until `release` closes the connection.
 * When it cannot, closes `db` and throws SQLite's error: SQLITE_BUSY when another connection holds it.
 */
function lockConnection(db: BetterSqlite3.Database): DataDirectoryLock {
  try {
    // EXCLUSIVE locking mode never gives a lock back, and the transaction that took it is never committed
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    // SQLite opens a file this user may not write read-only, and there BEGIN EXCLUSIVE takes a shared
    // lock only (two holders would run): a write, never committed, finds that out
    db.pragma('user_version = 1');
  } catch (err) {
    db.close();
    throw err;
  }
  return { release: () => db.close() };
}

/**
 * The same kind of lock on `file` (created empty), for a shorter task than a node (one dataset's
 * build): undefined when another process, or another connection of this one, holds it.
 */
export function tryLockFile(file: string): DataDirectoryLock | undefined {
  const db = new BetterSqlite3(file, { timeout: 0 });
  try {
    return lockConnection(db);
  } catch (err) {
    if ((err as { code?: string }).code === 'SQLITE_BUSY') return undefined;
    throw err;
  }
}

/**
 * The lock, taken by a command that is no node (data …, an export) before it changes a file of
 * `dataDir` that a node running there would have open; when one runs, a DataDirectoryInUseError
 * naming `file` with `refusal`, and the file is left as it is.
 */
function lockToChange(dataDir: string, file: string, refusal: string): DataDirectoryLock {
  try {
    return lockDataDirectory(dataDir);
  } catch (err) {
    if (!(err instanceof DataDirectoryInUseError)) throw err;
    throw new DataDirectoryInUseError(file, refusal, { cause: err });
  }
}

/**
 * Before an unreadable file is moved aside (--move-aside): renaming it (with its -wal and -shm) under
 * a running node would split what it writes between the moved file and a new one.
 */
export function lockToMoveAside(dataDir: string, reason: UnusableDatabaseError): DataDirectoryLock {
  return lockToChange(dataDir, reason.file, `${reason.problem}, and a Cohort node runs on ${dataDir} with it open, so it was not moved aside: stop that node, then pass --move-aside again`);
}

/**
 * Before `file`'s schema is upgraded from `from` to `to`: a node running there is an older Cohort's (a
 * current one would have migrated it), which a newer schema under it would break (the desktop app's
 * bundled version beside a newer CLI, say).
 */
export function lockToMigrate(dataDir: string, file: string, from: number, to: number): DataDirectoryLock {
  return lockToChange(dataDir, file, `${file} has schema version ${from}, which this Cohort would upgrade to ${to}, and an older Cohort's node runs on ${dataDir}: stop that node first (or use its Cohort for this command)`);
}
