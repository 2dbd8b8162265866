import path from 'node:path';
import type { Database } from 'better-sqlite3';
import { MIGRATIONS } from './migrations.js';
import { openSqliteFile, type OpenDatabaseOptions } from './sqlite-file.js';

export type { OpenDatabaseOptions } from './sqlite-file.js';

/** SQLite `application_id` marking a file as Cohort's ("Coh1"), so foreign databases are never migrated. */
export const APPLICATION_ID = 0x436f6831;
export const DATABASE_FILE = 'cohort.db';

/**
 * Opens (creating if needed) the Cohort database in `dataDir`: WAL journal, foreign keys on,
 * migrations applied. A file that is not a Cohort database is never modified: it raises a
 * CorruptDatabaseError or ForeignDatabaseError unless `moveAside` is set.
 */
export function openDatabase(dataDir: string, options: OpenDatabaseOptions = {}): Database {
  return openSqliteFile(path.join(dataDir, DATABASE_FILE), { applicationId: APPLICATION_ID, migrations: MIGRATIONS, journal: 'WAL' }, options);
}
