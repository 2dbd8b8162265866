import fs from 'node:fs';
import path from 'node:path';
import BetterSqlite3, { type Database } from 'better-sqlite3';
import { CorruptDatabaseError, ForeignDatabaseError, NewerSchemaError } from './errors.js';
import { MIGRATIONS, SCHEMA_VERSION, migrate } from './migrations.js';

/** SQLite `application_id` marking a file as Cohort's ("Coh1"), so foreign databases are never migrated. */
export const APPLICATION_ID = 0x436f6831;
export const DATABASE_FILE = 'cohort.db';

export interface OpenDatabaseOptions {
  /** If the file is corrupt or foreign, rename it (and its -wal/-shm) aside and start a new database. */
  readonly moveAside?: boolean;
  /** Told when a file was moved aside, with the new name. */
  readonly onMovedAside?: (movedTo: string, reason: Error) => void;
}

/**
 * Opens (creating if needed) the Cohort database in `dataDir`: WAL journal, foreign keys on,
 * migrations applied. A file that is not a Cohort database is never modified: it raises a
 * CorruptDatabaseError or ForeignDatabaseError unless `moveAside` is set.
 */
export function openDatabase(dataDir: string, options: OpenDatabaseOptions = {}): Database {
  const file = path.join(dataDir, DATABASE_FILE);
  restrictToOwner(dataDir, file);
  try {
    return openChecked(file);
  } catch (err) {
    if (!options.moveAside || !(err instanceof CorruptDatabaseError || err instanceof ForeignDatabaseError)) throw err;
    const movedTo = moveAside(file);
    options.onMovedAside?.(movedTo, err);
    return openChecked(file);
  }
}

/**
 * The database holds the peer's private key: the data directory becomes 0700 and the database 0600
 * (created so, or tightened when an earlier version left them 0755 and 0644), so another local user
 * can read neither. SQLite gives its -wal and -shm files the database's mode. POSIX only: on Windows
 * the per-user profile directory already keeps other users out.
 */
function restrictToOwner(dataDir: string, file: string): void {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  if (process.platform === 'win32') return;
  fs.chmodSync(dataDir, 0o700);
  fs.closeSync(fs.openSync(file, 'a', 0o600));
  for (const suffix of ['', '-wal', '-shm']) if (fs.existsSync(file + suffix)) fs.chmodSync(file + suffix, 0o600);
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
      throw new CorruptDatabaseError(file, corruptMessage(file, 'the file does not start with the SQLite header'));
    }
    if (read > 0 && read < SQLITE_HEADER.length) throw new CorruptDatabaseError(file, corruptMessage(file, `the file is truncated (${read} bytes)`));
  } finally {
    fs.closeSync(fd);
  }
}

function openChecked(file: string): Database {
  checkHeader(file);
  let db: Database;
  try {
    db = new BetterSqlite3(file);
  } catch (err) {
    throw new CorruptDatabaseError(file, `cannot open ${file}: ${(err as Error).message}`, { cause: err });
  }
  try {
    checkIdentity(db, file);
    db.pragma('journal_mode = WAL');
    // NORMAL in WAL mode keeps every commit atomic across crashes; only the last commits may roll back on power loss.
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
    db.pragma('busy_timeout = 5000');
    if ((db.pragma('application_id', { simple: true }) as number) === 0) db.pragma(`application_id = ${APPLICATION_ID}`);
    migrate(db, MIGRATIONS);
    return db;
  } catch (err) {
    db.close();
    if (err instanceof Error && 'code' in err && /^SQLITE_(NOTADB|CORRUPT)/.test(String(err.code))) {
      throw new CorruptDatabaseError(file, corruptMessage(file, err.message), { cause: err });
    }
    throw err;
  }
}

function checkIdentity(db: Database, file: string): void {
  const appId = db.pragma('application_id', { simple: true }) as number;
  const version = db.pragma('user_version', { simple: true }) as number;
  if (appId === APPLICATION_ID) {
    if (version > SCHEMA_VERSION) {
      throw new NewerSchemaError(file, `${file} has schema version ${version}, newer than this Cohort understands (${SCHEMA_VERSION}); upgrade Cohort or use another --data-dir`);
    }
    return;
  }
  const tables = db.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE type = 'table'").get() as { n: number };
  if (appId !== 0 || tables.n > 0) {
    throw new ForeignDatabaseError(file, `${file} is an SQLite database that Cohort did not create (application_id ${appId}, ${tables.n} tables); it was left untouched. Use another --data-dir, or pass --move-aside to rename it and start afresh.`);
  }
}

function corruptMessage(file: string, detail: string): string {
  return `${file} is not a readable Cohort database (${detail}); it was left untouched. Pass --move-aside to rename it and start afresh, or restore it from a backup.`;
}

/** Renames the database and its WAL/SHM files to `<name>.moved-<time>`; returns the new database name. */
function moveAside(file: string): string {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const target = `${file}.moved-${stamp}`;
  for (const suffix of ['', '-wal', '-shm']) {
    if (fs.existsSync(file + suffix)) fs.renameSync(file + suffix, target + suffix);
  }
  return target;
}
