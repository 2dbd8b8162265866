import path from 'node:path';
import type { Database } from 'better-sqlite3';
import { CHECKPOINT_TABLES_SQL, openCheckpointDatabase } from './checkpoint-database.js';
import { datasetIdOf } from './dataset-id.js';
import type { Migration } from './sqlite-file.js';

export type { Migration } from './sqlite-file.js';

/** cohort.db's schema changes (checkpoints.db has its own: checkpoint-database.ts). */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'checkpoints, metrics, data-shard cache, peers, settings',
    up: (db) =>
      db.exec(`${CHECKPOINT_TABLES_SQL}
        CREATE TABLE metrics (
          series TEXT    NOT NULL,
          ts     INTEGER NOT NULL,
          value  REAL    NOT NULL,
          peer   TEXT    NOT NULL DEFAULT '',
          epoch  INTEGER
        );
        CREATE INDEX metrics_series_ts ON metrics (series, ts);
        CREATE TABLE shards (
          cache_key    TEXT    NOT NULL,
          seq          INTEGER NOT NULL,
          examples     INTEGER NOT NULL,
          tokens       INTEGER NOT NULL,
          data         BLOB    NOT NULL,
          sha256       TEXT    NOT NULL,
          created_at   INTEGER NOT NULL,
          last_used_at INTEGER NOT NULL,
          PRIMARY KEY (cache_key, seq)
        );
        CREATE TABLE peers (
          peer_id    TEXT    PRIMARY KEY,
          addrs      TEXT    NOT NULL DEFAULT '[]',
          first_seen INTEGER NOT NULL,
          last_seen  INTEGER NOT NULL,
          info       TEXT    NOT NULL DEFAULT '{}'
        );
        CREATE TABLE settings (
          key   TEXT PRIMARY KEY,
          value TEXT NOT NULL
        );
      `),
  },
  {
    version: 2,
    description: 'data pipeline: prepared datasets (stats, tokenizer, params) and per-peer read cursors over their shards',
    up: (db) =>
      db.exec(`
        CREATE TABLE datasets (
          cache_key      TEXT    PRIMARY KEY,
          source         TEXT    NOT NULL,
          dataset_hash   TEXT    NOT NULL,
          tokenizer_hash TEXT    NOT NULL,
          tokenizer_file TEXT    NOT NULL,
          params         TEXT    NOT NULL,
          vocab_size     INTEGER NOT NULL,
          documents      INTEGER NOT NULL DEFAULT 0,
          sentences      INTEGER NOT NULL DEFAULT 0,
          examples       INTEGER NOT NULL DEFAULT 0,
          tokens         INTEGER NOT NULL DEFAULT 0,
          shard_count    INTEGER NOT NULL DEFAULT 0,
          complete       INTEGER NOT NULL DEFAULT 0,
          created_at     INTEGER NOT NULL,
          last_used_at   INTEGER NOT NULL
        );
        CREATE TABLE data_cursors (
          cache_key     TEXT    NOT NULL,
          peer_id       TEXT    NOT NULL,
          seed          INTEGER NOT NULL,
          epoch         INTEGER NOT NULL,
          shard_pos     INTEGER NOT NULL,
          example_pos   INTEGER NOT NULL,
          examples_read INTEGER NOT NULL,
          updated_at    INTEGER NOT NULL,
          PRIMARY KEY (cache_key, peer_id, seed)
        );
      `),
  },
  {
    version: 3,
    description: 'index metrics by (series, peer, ts) for the dashboard\'s newest-value-per-peer reads',
    up: (db) => db.exec('CREATE INDEX metrics_series_peer_ts ON metrics (series, peer, ts)'),
  },
  {
    version: 4,
    description: 'coordinator contribution accounting: one credited row per (run, peer, step) and each peer\'s throughput baseline, so a restarted coordinator continues its credits',
    up: (db) =>
      db.exec(`
        CREATE TABLE contribution_credits (
          run_id          TEXT    NOT NULL,
          peer_id         TEXT    NOT NULL,
          epoch           INTEGER NOT NULL,
          display_name    TEXT,
          claimed         REAL    NOT NULL,
          credited        REAL    NOT NULL,
          compute_seconds REAL    NOT NULL,
          flag            TEXT,
          ts              INTEGER NOT NULL,
          PRIMARY KEY (run_id, peer_id, epoch)
        );
        CREATE INDEX contribution_credits_ts ON contribution_credits (ts);
        CREATE TABLE contribution_peers (
          run_id          TEXT    NOT NULL,
          peer_id         TEXT    NOT NULL,
          display_name    TEXT,
          time            INTEGER NOT NULL,
          total_samples   REAL    NOT NULL,
          epoch           INTEGER NOT NULL,
          samples_in_epoch REAL   NOT NULL,
          compute_seconds REAL    NOT NULL,
          PRIMARY KEY (run_id, peer_id)
        );
      `),
  },
  {
    version: 5,
    description: 'data: each prepared dataset records its content identity (dataset_id over its shard hashes, max sequence length, SOP parameters and tokenizer sha256), computed here for datasets prepared before; a dataset fetched from the swarm keeps its manifest (it may hold only some shards); shards are found by sha256',
    up: (db) => {
      db.exec(`
        ALTER TABLE datasets ADD COLUMN dataset_id TEXT;
        ALTER TABLE datasets ADD COLUMN manifest TEXT;
        CREATE INDEX shards_sha256 ON shards (sha256);
      `);
      const rows = db.prepare('SELECT cache_key, params, tokenizer_hash FROM datasets WHERE complete = 1').all() as { cache_key: string; params: string; tokenizer_hash: string }[];
      const shards = db.prepare('SELECT sha256 FROM shards WHERE cache_key = ? ORDER BY seq').pluck();
      const set = db.prepare('UPDATE datasets SET dataset_id = ? WHERE cache_key = ?');
      for (const row of rows) {
        const params = JSON.parse(row.params) as { maxSeqLen: number; shortSeqProb: number };
        const id = datasetIdOf({ maxSeqLen: params.maxSeqLen, shortSeqProb: params.shortSeqProb, tokenizerSha256: row.tokenizer_hash }, shards.all(row.cache_key) as string[]);
        set.run(id, row.cache_key);
      }
    },
  },
  {
    version: 6,
    description: 'checkpoints move to checkpoints.db beside this file (their long writes no longer hold this file\'s write lock): existing ones are copied there, then the tables are dropped',
    up: (db) => {
      moveCheckpointsOut(db);
      db.exec('DROP TABLE checkpoint_chunks; DROP TABLE checkpoints;');
    },
  },
  {
    version: 7,
    description: 'the poisoned averaging parts each peer sent this node, per run, so bans outlive a restart',
    up: (db) =>
      db.exec(`
        CREATE TABLE peer_offences (
          run_id     TEXT    NOT NULL,
          peer_id    TEXT    NOT NULL,
          count      INTEGER NOT NULL,
          reason     TEXT    NOT NULL,
          updated_at INTEGER NOT NULL,
          PRIMARY KEY (run_id, peer_id)
        );
      `),
  },
  {
    version: 8,
    description: 'metric points by time alone: what thinning old points (MetricsStore.thin), pruning other peers\' points and exports since a time read, without scanning the whole table',
    up: (db) => db.exec('CREATE INDEX metrics_ts ON metrics (ts);'),
  },
];

/**
 * Copies cohort.db's checkpoints, ids kept, into checkpoints.db beside it in one transaction of that
 * file. INSERT OR IGNORE: a process killed after that commit and before cohort.db's (which drops the
 * tables) copies again on the next open and adds nothing twice.
 */
function moveCheckpointsOut(db: Database): void {
  if ((db.prepare('SELECT count(*) FROM checkpoints').pluck().get() as number) === 0) return;
  const target = openCheckpointDatabase(path.dirname(db.name));
  try {
    const row = target.prepare('INSERT OR IGNORE INTO checkpoints (id, kind, epoch, created_at, size, sha256, chunk_count, meta) VALUES (@id, @kind, @epoch, @created_at, @size, @sha256, @chunk_count, @meta)');
    const chunk = target.prepare('INSERT OR IGNORE INTO checkpoint_chunks (checkpoint_id, seq, data) VALUES (@checkpoint_id, @seq, @data)');
    target.transaction(() => {
      for (const r of db.prepare('SELECT * FROM checkpoints').iterate()) row.run(r);
      for (const c of db.prepare('SELECT checkpoint_id, seq, data FROM checkpoint_chunks').iterate()) chunk.run(c);
    })();
  } finally {
    target.close();
  }
}
