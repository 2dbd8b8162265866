import path from 'node:path';
import type { Database } from 'better-sqlite3';
import { openSqliteFile, type Migration, type OpenDatabaseOptions } from './sqlite-file.js';

/**
 * Checkpoints have a database file of their own beside cohort.db, so a long checkpoint write (the
 * full-state saver's worker) never holds the lock the node's metric, progress and dataset writes need.
 */
export const CHECKPOINT_DATABASE_FILE = 'checkpoints.db';

/** `application_id` of the checkpoint file ("CohK"), apart from cohort.db's. */
export const CHECKPOINT_APPLICATION_ID = 0x436f684b;

/** The checkpoint tables: checkpoints.db's first schema, and cohort.db's up to its version 5 (migrations.ts). */
export const CHECKPOINT_TABLES_SQL = `
        CREATE TABLE checkpoints (
          id          INTEGER PRIMARY KEY,
          kind        TEXT    NOT NULL,
          epoch       INTEGER NOT NULL,
          created_at  INTEGER NOT NULL,
          size        INTEGER NOT NULL,
          sha256      TEXT    NOT NULL,
          chunk_count INTEGER NOT NULL,
          meta        TEXT    NOT NULL DEFAULT '{}'
        );
        CREATE INDEX checkpoints_kind ON checkpoints (kind, id);
        CREATE TABLE checkpoint_chunks (
          checkpoint_id INTEGER NOT NULL REFERENCES checkpoints (id) ON DELETE CASCADE,
          seq           INTEGER NOT NULL,
          data          BLOB    NOT NULL,
          UNIQUE (checkpoint_id, seq)
        );
`;

const CHECKPOINT_MIGRATIONS: readonly Migration[] = [
  { version: 1, description: 'checkpoints as chunked blobs (the tables cohort.db held up to its schema version 5)', up: (db) => db.exec(CHECKPOINT_TABLES_SQL) },
];

/**
 * Opens (creating if needed) the checkpoint file of `dataDir`, or the file itself when given one
 * ending in CHECKPOINT_DATABASE_FILE (the saver's worker). A rollback journal, not WAL: a checkpoint's
 * pages are appended or reuse the pruned checkpoint's free pages, which SQLite writes once without
 * journaling them, where WAL writes every page twice (bench/checkpoint.ts; docs/collab.md).
 */
export function openCheckpointDatabase(dataDirOrFile: string, options: OpenDatabaseOptions = {}): Database {
  const file = path.basename(dataDirOrFile) === CHECKPOINT_DATABASE_FILE ? dataDirOrFile : path.join(dataDirOrFile, CHECKPOINT_DATABASE_FILE);
  return openSqliteFile(file, { applicationId: CHECKPOINT_APPLICATION_ID, migrations: CHECKPOINT_MIGRATIONS, journal: 'TRUNCATE' }, options);
}
