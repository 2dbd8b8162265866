import fs from 'node:fs';
import path from 'node:path';
import type { Database } from 'better-sqlite3';
import { CheckpointStore } from './checkpoints.js';
import { ContributionStore } from './contributions.js';
import { DATABASE_FILE, openDatabase, type OpenDatabaseOptions } from './database.js';
import { MetricsStore } from './metrics.js';
import { PeerStore } from './peers.js';
import { SettingsStore } from './settings-store.js';
import { StoreError } from './errors.js';

export * from './errors.js';
export { DATABASE_FILE } from './database.js';
export type { CheckpointInfo, SaveCheckpoint } from './checkpoints.js';
export type { CreditRow, PeerTotals, ThroughputBaseline } from './contributions.js';
export type { MetricPoint, StoredMetric } from './metrics.js';
export type { SeenPeer } from './peers.js';

/** The node's local database: one SQLite file in the data directory, one small store per concern. */
export interface Store {
  readonly file: string;
  readonly db: Database;
  readonly checkpoints: CheckpointStore;
  readonly metrics: MetricsStore;
  readonly settings: SettingsStore;
  readonly peers: PeerStore;
  /** A coordinator's credited contributions (src/collab/coordinator.ts). */
  readonly contributions: ContributionStore;
  close(): void;
}

export interface OpenStoreOptions extends OpenDatabaseOptions {
  /** Told about each metric point skipped as invalid (default: a process warning on stderr). */
  readonly onInvalidMetric?: (message: string) => void;
}

export function openStore(dataDir: string, options: OpenStoreOptions = {}): Store {
  const db = openDatabase(dataDir, options);
  const file = path.join(dataDir, DATABASE_FILE);
  return {
    file,
    db,
    checkpoints: new CheckpointStore(db, file),
    metrics: new MetricsStore(db, options.onInvalidMetric),
    settings: new SettingsStore(db),
    peers: new PeerStore(db),
    contributions: new ContributionStore(db),
    close: () => db.close(),
  };
}

/** The store of a node's existing data directory; StoreError (naming the directory) when it has none, instead of creating one. */
export function openExistingStore(dataDir: string): Store {
  const file = path.join(dataDir, DATABASE_FILE);
  if (!fs.existsSync(file)) throw new StoreError(file, `no Cohort database in ${dataDir} (${file} does not exist); pass the --data-dir of the node or coordinator`);
  return openStore(dataDir);
}
