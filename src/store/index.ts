import fs from 'node:fs';
import path from 'node:path';
import type { Database } from 'better-sqlite3';
import { CHECKPOINT_DATABASE_FILE, openCheckpointDatabase } from './checkpoint-database.js';
import { CheckpointStore } from './checkpoints.js';
import { ContributionStore } from './contributions.js';
import { lockDataDirectory, lockToMigrate, lockToMoveAside, type DataDirectoryLock } from './data-dir-lock.js';
import { DATABASE_FILE, openDatabase, type OpenDatabaseOptions } from './database.js';
import { MetricsStore } from './metrics.js';
import { cannotUseDataDirectory } from './sqlite-file.js';
import { OffenceStore } from './offences.js';
import { PeerStore } from './peers.js';
import { SettingsStore } from './settings-store.js';
import { StoreError, UnusableDatabaseError } from './errors.js';
import type { Logger } from '../log/logger.js';

export * from './errors.js';
export { DATABASE_FILE } from './database.js';
export { CHECKPOINT_DATABASE_FILE } from './checkpoint-database.js';
export { LOCK_FILE } from './data-dir-lock.js';
export { checkpointName } from './checkpoints.js';
export type { CheckpointInfo, SaveCheckpoint } from './checkpoints.js';
export type { CreditRow, PeerTotals, ThroughputBaseline } from './contributions.js';
export type { MetricPoint, StoredMetric } from './metrics.js';
export type { SeenPeer } from './peers.js';

/**
 * The node's local database: one SQLite file in the data directory (cohort.db), one small store per
 * concern; checkpoints are in a file of their own beside it (checkpoints.db: `checkpoints.file`).
 */
export interface Store {
  readonly file: string;
  readonly db: Database;
  /** Over checkpoints.db, with its own connection (`checkpoints.db`). */
  readonly checkpoints: CheckpointStore;
  readonly metrics: MetricsStore;
  readonly settings: SettingsStore;
  readonly peers: PeerStore;
  /** A coordinator's credited contributions (src/collab/coordinator.ts). */
  readonly contributions: ContributionStore;
  /** Poisoned averaging parts per run and peer: the node's bans (src/averaging/hub.ts). */
  readonly offences: OffenceStore;
  close(): void;
}

export interface OpenStoreOptions extends OpenDatabaseOptions {
  /** Told about each metric point skipped as invalid (default: a process warning on stderr). */
  readonly onInvalidMetric?: (message: string) => void;
  /**
   * This process runs the directory's node: no other process may while the store is open
   * (lockDataDirectory; DataDirectoryInUseError otherwise). Commands that only read or prepare data
   * leave it unset, so they work beside a running node.
   */
  readonly exclusive?: boolean;
}

/** How a node or command opens its store: with `--move-aside` as configured, a file moved aside and each invalid metric point said in its log. */
export function loggedStoreOptions(moveAside: boolean, log: Logger): OpenStoreOptions {
  return { moveAside, onMovedAside: (to, why) => log.warn({ movedTo: to }, `moved the unreadable database aside to ${to}: ${why.problem}`), onInvalidMetric: (message) => log.warn(message) };
}

/** How a node (run, start, swarm start, train, the desktop runtime) opens its store: logged, and the directory locked to it. */
export function nodeStoreOptions(moveAside: boolean, log: Logger): OpenStoreOptions {
  return { ...loggedStoreOptions(moveAside, log), exclusive: true };
}

export function openStore(dataDir: string, options: OpenStoreOptions = {}): Store {
  // the lock first: a second node started with --move-aside must not move the first one's files
  const lock = options.exclusive ? lockDataDirectory(dataDir) : undefined;
  // nor a data command its files: it moves one aside, or migrates it, only while it holds the lock itself
  let held: DataDirectoryLock | undefined;
  const opening: OpenStoreOptions = lock
    ? options
    : {
        ...options,
        beforeMoveAside: (reason) => void (held ??= lockToMoveAside(dataDir, reason)),
        beforeMigrate: (file, from, to) => void (held ??= lockToMigrate(dataDir, file, from, to)),
      };
  let db: Database | undefined;
  let checkpointDb: Database;
  try {
    // cohort.db first: its migration 6 moves the checkpoints an older version kept there into checkpoints.db
    db = openDatabase(dataDir, opening);
    checkpointDb = openCheckpointDatabase(dataDir, opening);
  } catch (err) {
    db?.close();
    lock?.release();
    throw err;
  } finally {
    held?.release();
  }
  const file = path.join(dataDir, DATABASE_FILE);
  return {
    file,
    db,
    checkpoints: new CheckpointStore(checkpointDb, path.join(dataDir, CHECKPOINT_DATABASE_FILE)),
    metrics: new MetricsStore(db, options.onInvalidMetric),
    settings: new SettingsStore(db),
    peers: new PeerStore(db),
    contributions: new ContributionStore(db),
    offences: new OffenceStore(db),
    close: () => {
      checkpointDb.close();
      db.close();
      lock?.release();
    },
  };
}

/** The store of a node's existing data directory; StoreError (naming the directory) when it has none, instead of creating one. */
export function openExistingStore(dataDir: string): Store {
  const file = path.join(dataDir, DATABASE_FILE);
  try {
    fs.statSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new StoreError(file, `no Cohort database in ${dataDir} (${file} does not exist); pass the --data-dir of the node or coordinator`);
    // it exists, in another user's directory: "does not exist" would send the user looking elsewhere
    throw cannotUseDataDirectory(dataDir, file, err);
  }
  try {
    return openStore(dataDir);
  } catch (err) {
    // a command that only reads has nothing to move aside for: the data is in the file or a backup
    if (err instanceof UnusableDatabaseError) throw new StoreError(err.file, `${err.problem}; it was left untouched: restore it from a backup to read it`, { cause: err });
    throw err;
  }
}
