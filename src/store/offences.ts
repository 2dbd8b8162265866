import type { Database } from 'better-sqlite3';

/** A run's offences are forgotten once this node has not taken part in it for this long (runs last weeks; a run this node still joins keeps them). */
export const OFFENCES_RETENTION_MS = 30 * 24 * 3600 * 1000;

/** The averaging hub's Offence (src/averaging/hub.ts) as a row; store/ cannot import it: averaging/ imports swarm/, which imports store/. */
interface OffenceRow {
  readonly peer: string;
  readonly count: number;
  readonly reason: string;
}

/**
 * The offences (and so the bans) of this node's runs, keyed by run id, so a restarted node keeps
 * refusing a peer it banned for the run (docs/security.md).
 */
export class OffenceStore {
  constructor(private readonly db: Database) {}

  /**
   * The offences of run `runId`, as the averaging hub keeps them (its OffenceLedger). Opening them
   * marks the run as still joined and forgets the runs this node has not joined for OFFENCES_RETENTION_MS.
   */
  forRun(runId: string, now = Date.now()): { load(): OffenceRow[]; record(offence: OffenceRow): void } {
    this.db.transaction(() => {
      this.db.prepare('UPDATE peer_offences SET updated_at = ? WHERE run_id = ?').run(now, runId);
      this.db.prepare('DELETE FROM peer_offences WHERE updated_at < ?').run(now - OFFENCES_RETENTION_MS);
    })();
    return {
      load: () => this.db.prepare('SELECT peer_id AS peer, count, reason FROM peer_offences WHERE run_id = ? ORDER BY peer_id').all(runId) as OffenceRow[],
      record: (o) =>
        void this.db
          .prepare(
            `INSERT INTO peer_offences (run_id, peer_id, count, reason, updated_at) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (run_id, peer_id) DO UPDATE SET count = excluded.count, reason = excluded.reason, updated_at = excluded.updated_at`,
          )
          .run(runId, o.peer, o.count, o.reason, Date.now()),
    };
  }
}
