import fs from 'node:fs';
import path from 'node:path';
import BetterSqlite3, { type Database } from 'better-sqlite3';
import { CorruptDatabaseError, ForeignDatabaseError, NewerSchemaError, StoreError, UnusableDatabaseError } from './errors.js';

/**
 * Versioned schema changes, applied in order inside one transaction each; the schema version is
 * SQLite's `user_version`. Never edit a released migration: append a new one.
 */
export interface Migration {
  readonly version: number;
  readonly description: string;
  readonly up: (db: Database) => void;
}

/** Applies the migrations newer than the database's version; returns the versions applied. */
export function migrate(db: Database, migrations: readonly Migration[]): number[] {
  const current = db.pragma('user_version', { simple: true }) as number;
  const applied: number[] = [];
  for (const m of migrations) {
    if (m.version <= current) continue;
    db.transaction(() => {
      m.up(db);
      db.pragma(`user_version = ${m.version}`);
    })();
    applied.push(m.version);
  }
  return applied;
}

/** What sets one of Cohort's SQLite files apart: its application_id, its schema and its journal. */
export interface SqliteFileKind {
  /** SQLite `application_id` marking the file as this kind, so foreign databases are never migrated. */
  readonly applicationId: number;
  readonly migrations: readonly Migration[];
  /**
   * `WAL`: readers never wait for the writer; every page is written twice (into the WAL, then into the
   * file). `TRUNCATE` (rollback journal): pages appended or reused from the free list are written once.
   */
  readonly journal: 'WAL' | 'TRUNCATE';
}

export interface OpenDatabaseOptions {
  /** If the file is corrupt or foreign, rename it (and its -wal/-shm/-journal) aside and start a new database. */
  readonly moveAside?: boolean;
  /** Told when a file was moved aside, with the new name. */
  readonly onMovedAside?: (movedTo: string, reason: UnusableDatabaseError) => void;
  /** Called before a file is moved aside; throws to leave it where it is. */
  readonly beforeMoveAside?: (reason: UnusableDatabaseError) => void;
  /** Called before an existing `file` is migrated from schema `from` to `to`; throws to leave it as it is. */
  readonly beforeMigrate?: (file: string, from: number, to: number) => void;
  /**
   * This process has the file open already (a worker thread's connection beside the main thread's,
   * which created and checked it): SQLite alone opens it. Creating it, reading its header or moving it
   * aside would open and close a descriptor of it, and POSIX then drops every lock this process's
   * connections hold on it: another process's connection (an sqlite3 shell, a backup tool) took its
   * own close for the last one and deleted the WAL under them, losing their later writes.
   */
  readonly alreadyOpen?: boolean;
}

/** Files SQLite keeps beside a database: they share its fate (mode, moving aside). */
const COMPANIONS = ['', '-wal', '-shm', '-journal'];

/**
 * Opens (creating if needed) one of Cohort's SQLite files: owner-only modes, the kind's journal,
 * foreign keys on, migrations applied. A file that is not of this kind is never modified: it raises a
 * CorruptDatabaseError or ForeignDatabaseError unless `moveAside` is set.
 */
export function openSqliteFile(file: string, kind: SqliteFileKind, options: OpenDatabaseOptions = {}): Database {
  if (options.alreadyOpen) return openChecked(file, kind, options, false);
  restrictToOwner(path.dirname(file), file);
  try {
    return openChecked(file, kind, options);
  } catch (err) {
    if (!options.moveAside || !(err instanceof UnusableDatabaseError)) throw err;
    options.beforeMoveAside?.(err);
    const movedTo = moveAside(file);
    options.onMovedAside?.(movedTo, err);
    return openChecked(file, kind, options);
  }
}

/**
 * The database holds the peer's private key: the data directory becomes 0700 and the database 0600
 * (created so, or tightened when an earlier version left them 0755 and 0644), so another local user
 * can read neither. SQLite gives its -wal, -shm and -journal files the database's mode. POSIX only: on
 * Windows the per-user profile directory already keeps other users out.
 */
function restrictToOwner(dataDir: string, file: string): void {
  ownDataDirectory(dataDir, file);
  if (process.platform === 'win32') return;
  try {
    fs.closeSync(fs.openSync(file, 'a', 0o600));
    for (const suffix of COMPANIONS) if (fs.existsSync(file + suffix)) fs.chmodSync(file + suffix, 0o600);
  } catch (err) {
    throw cannotUseDataDirectory(dataDir, file, err);
  }
}

/**
 * Creates the data directory, or makes an existing one its owner's alone (0700; POSIX only), before
 * anything in it is opened: a folder this user may not take (another user's, on a read-only file
 * system) is a StoreError naming `file` and saying why, not SQLite's bare "unable to open database file".
 */
export function ownDataDirectory(dataDir: string, file: string): void {
  try {
    fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    if (process.platform !== 'win32') fs.chmodSync(dataDir, 0o700);
  } catch (err) {
    throw cannotUseDataDirectory(dataDir, file, err);
  }
}

/**
 * A --data-dir that names a file, or a folder this user may not use: say so, not fs's bare EEXIST. A
 * permission error is usually another user's directory (a service's, 0700), which that user can use.
 */
export function cannotUseDataDirectory(dataDir: string, file: string, err: unknown): StoreError {
  const code = (err as NodeJS.ErrnoException).code;
  const advice = code === 'EACCES' || code === 'EPERM' ? 'run this command as the user it belongs to (a service’s: that user, or root), or pass --data-dir a folder this user can write' : 'pass --data-dir a folder this user can write, or omit it';
  return new StoreError(file, `cannot use ${dataDir} as the data directory (${(err as Error).message}); ${advice}`, { cause: err });
}

const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/** Rejects a non-SQLite file before SQLite opens it, so SQLite never touches its -wal/-shm companions. */
function checkHeader(file: string): void {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  try {
    const header = Buffer.alloc(SQLITE_HEADER.length);
    const read = fs.readSync(fd, header, 0, header.length, 0);
    if (read > 0 && !header.subarray(0, read).equals(SQLITE_HEADER.subarray(0, read))) {
      throw corrupt(file, 'the file does not start with the SQLite header');
    }
    if (read > 0 && read < SQLITE_HEADER.length) throw corrupt(file, `the file is truncated (${read} bytes)`);
  } finally {
    fs.closeSync(fd);
  }
}

function openChecked(file: string, kind: SqliteFileKind, options: OpenDatabaseOptions, readHeader = true): Database {
  if (readHeader) checkHeader(file);
  let db: Database;
  try {
    db = new BetterSqlite3(file);
  } catch (err) {
    throw corrupt(file, `SQLite cannot open it: ${(err as Error).message}`, err);
  }
  try {
    const from = checkIdentity(db, file, kind);
    db.pragma(`journal_mode = ${kind.journal}`);
    // NORMAL in WAL mode keeps every commit atomic across crashes; only the last commits may roll back on
    // power loss. A rollback journal needs FULL for the same (NORMAL could corrupt the file on power loss).
    db.pragma(`synchronous = ${kind.journal === 'WAL' ? 'NORMAL' : 'FULL'}`);
    db.pragma('foreign_keys = ON');
    db.pragma('busy_timeout = 5000');
    if ((db.pragma('application_id', { simple: true }) as number) === 0) db.pragma(`application_id = ${kind.applicationId}`);
    const to = latestVersion(kind);
    // a new file (version 0) is nobody's yet; an older one may be a running older node's
    if (from > 0 && from < to) options.beforeMigrate?.(file, from, to);
    migrate(db, kind.migrations);
    return db;
  } catch (err) {
    db.close();
    if (err instanceof Error && 'code' in err && /^SQLITE_(NOTADB|CORRUPT)/.test(String(err.code))) {
      throw corrupt(file, err.message, err);
    }
    throw err;
  }
}

/** The schema version the kind's newest migration brings a file to. */
function latestVersion(kind: SqliteFileKind): number {
  return kind.migrations.at(-1)?.version ?? 0;
}

/** Refuses a file of another kind or a newer schema; returns its schema version. */
function checkIdentity(db: Database, file: string, kind: SqliteFileKind): number {
  const appId = db.pragma('application_id', { simple: true }) as number;
  const version = db.pragma('user_version', { simple: true }) as number;
  const known = latestVersion(kind);
  if (appId === kind.applicationId) {
    if (version > known) {
      throw new NewerSchemaError(file, `${file} has schema version ${version}, newer than this Cohort understands (${known})`, 'Upgrade Cohort to use it, or use another --data-dir.');
    }
    return version;
  }
  const tables = db.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE type = 'table'").get() as { n: number };
  if (appId !== 0 || tables.n > 0) {
    throw new ForeignDatabaseError(file, `${file} is an SQLite database that Cohort did not create (application_id ${appId}, ${tables.n} tables)`, 'Use another --data-dir, or pass --move-aside to rename it and start afresh.');
  }
  return version; // a new file: 0
}

function corrupt(file: string, detail: string, cause?: unknown): CorruptDatabaseError {
  return new CorruptDatabaseError(file, `${file} is not a readable Cohort database (${detail})`, 'Pass --move-aside to rename it and start afresh, or restore it from a backup.', cause === undefined ? undefined : { cause });
}

/** Renames the database and its WAL/SHM/journal files to `<name>.moved-<time>`; returns the new database name. */
function moveAside(file: string): string {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const target = `${file}.moved-${stamp}`;
  for (const suffix of COMPANIONS) {
    if (fs.existsSync(file + suffix)) fs.renameSync(file + suffix, target + suffix);
  }
  return target;
}
