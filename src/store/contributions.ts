import type { Database } from 'better-sqlite3';

/** One optimizer step of one peer, as a coordinator credited it. */
export interface CreditRow {
  /** The swarm's run id (a data dir may coordinate several runs over time; epochs restart per run). */
  readonly runId: string;
  readonly peerId: string;
  /** The epoch the step finished (the swarm epoch before the step). */
  readonly epoch: number;
  readonly displayName?: string;
  readonly claimed: number;
  readonly credited: number;
  /** Seconds of compute credited for the step. */
  readonly computeSeconds: number;
  /** Why the claim was cut, when it was. */
  readonly flag?: string;
  /** When it was credited (ms since the Unix epoch). */
  readonly ts: number;
}

/** The report a peer's next step is measured from (its cumulative counters at that report). */
export interface ThroughputBaseline {
  /** The peer's own timestamp of the report (ms). */
  readonly time: number;
  readonly totalSamples: number;
  readonly epoch: number;
  readonly samplesInEpoch: number;
  readonly computeSeconds: number;
}

/** A peer's credits in one run, summed over the steps credited. */
export interface PeerTotals {
  readonly runId: string;
  readonly peerId: string;
  /** The display name of its newest credited step. */
  readonly displayName?: string;
  readonly claimed: number;
  readonly credited: number;
  readonly computeSeconds: number;
  readonly steps: number;
  readonly flaggedSteps: number;
}

/** A row with its NULL columns left out: the optional fields (display name, flag) are absent, not null. */
function withoutNulls<T>(row: Record<string, unknown>): T {
  return Object.fromEntries(Object.entries(row).filter(([, v]) => v !== null)) as T;
}

/**
 * A coordinator's contribution accounting: each credited step once per (run, peer, epoch), and the
 * baseline each peer's next step is measured from, so a restarted coordinator continues where it
 * stopped and never credits a step twice.
 */
export class ContributionStore {
  constructor(private readonly db: Database) {}

  /**
   * Records a credited step and the baseline to measure the peer's next step from, in one
   * transaction. Returns false (and writes nothing) when the step was already credited.
   */
  credit(row: CreditRow, baseline: ThroughputBaseline): boolean {
    return this.db.transaction((): boolean => {
      const inserted = this.db
        .prepare('INSERT OR IGNORE INTO contribution_credits (run_id, peer_id, epoch, display_name, claimed, credited, compute_seconds, flag, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)')
        .run(row.runId, row.peerId, row.epoch, row.displayName ?? null, row.claimed, row.credited, row.computeSeconds, row.flag ?? null, row.ts).changes;
      if (inserted === 0) return false;
      this.db
        .prepare(
          `INSERT INTO contribution_peers (run_id, peer_id, display_name, time, total_samples, epoch, samples_in_epoch, compute_seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (run_id, peer_id) DO UPDATE SET display_name = excluded.display_name, time = excluded.time, total_samples = excluded.total_samples,
             epoch = excluded.epoch, samples_in_epoch = excluded.samples_in_epoch, compute_seconds = excluded.compute_seconds`,
        )
        .run(row.runId, row.peerId, row.displayName ?? null, baseline.time, baseline.totalSamples, baseline.epoch, baseline.samplesInEpoch, baseline.computeSeconds);
      return true;
    })();
  }

  isCredited(runId: string, peerId: string, epoch: number): boolean {
    return this.db.prepare('SELECT 1 FROM contribution_credits WHERE run_id = ? AND peer_id = ? AND epoch = ?').get(runId, peerId, epoch) !== undefined;
  }

  /** The newest epoch of the run with a credited step. */
  lastCreditedEpoch(runId: string): number | undefined {
    return (this.db.prepare('SELECT MAX(epoch) AS epoch FROM contribution_credits WHERE run_id = ?').get(runId) as { epoch: number | null }).epoch ?? undefined;
  }

  /** One peer's baseline as of its last credited step and the samples credited to it in the run (what a coordinator restores when the peer reappears). */
  peerState(runId: string, peerId: string): { baseline?: ThroughputBaseline; credited: number } {
    const baseline = this.db
      .prepare('SELECT time, total_samples AS totalSamples, epoch, samples_in_epoch AS samplesInEpoch, compute_seconds AS computeSeconds FROM contribution_peers WHERE run_id = ? AND peer_id = ?')
      .get(runId, peerId) as ThroughputBaseline | undefined;
    const { credited } = this.db.prepare('SELECT COALESCE(SUM(credited), 0) AS credited FROM contribution_credits WHERE run_id = ? AND peer_id = ?').get(runId, peerId) as { credited: number };
    return { credited, ...(baseline ? { baseline } : {}) };
  }

  /** Display name per peer (as of its newest credited step in any run; peers without one are absent). */
  displayNames(): Map<string, string> {
    // oldest first, so the newest name of a peer that took part in several runs wins
    const rows = this.db.prepare('SELECT peer_id, display_name FROM contribution_peers WHERE display_name IS NOT NULL ORDER BY time').all() as Array<{ peer_id: string; display_name: string }>;
    return new Map(rows.map((r) => [r.peer_id, r.display_name]));
  }

  /** Credited steps in the order they were credited, optionally of one run, since `since` (ms), only the flagged ones. */
  credits(options: { runId?: string; since?: number; flaggedOnly?: boolean } = {}): CreditRow[] {
    const rows = this.db
      .prepare(
        `SELECT run_id AS runId, peer_id AS peerId, epoch, display_name AS displayName, claimed, credited, compute_seconds AS computeSeconds, flag, ts
         FROM contribution_credits WHERE ts >= ? ${options.runId !== undefined ? 'AND run_id = ?' : ''} ${options.flaggedOnly ? 'AND flag IS NOT NULL' : ''} ORDER BY ts, rowid`,
      )
      .all(options.since ?? 0, ...(options.runId !== undefined ? [options.runId] : [])) as Record<string, unknown>[];
    return rows.map(withoutNulls<CreditRow>);
  }

  /** Per-(run, peer) sums of the steps credited, optionally of one run and since `since` (ms); by run, then most credited first. */
  totals(options: { runId?: string; since?: number } = {}): PeerTotals[] {
    const rows = this.db
      .prepare(
        `SELECT run_id AS runId, peer_id AS peerId,
           (SELECT display_name FROM contribution_credits n WHERE n.run_id = c.run_id AND n.peer_id = c.peer_id ORDER BY n.ts DESC, n.rowid DESC LIMIT 1) AS displayName,
           SUM(claimed) AS claimed, SUM(credited) AS credited, SUM(compute_seconds) AS computeSeconds, COUNT(*) AS steps, COUNT(flag) AS flaggedSteps
         FROM contribution_credits c WHERE ts >= ? ${options.runId !== undefined ? 'AND run_id = ?' : ''} GROUP BY run_id, peer_id ORDER BY run_id, credited DESC, peer_id`,
      )
      .all(options.since ?? 0, ...(options.runId !== undefined ? [options.runId] : [])) as Record<string, unknown>[];
    return rows.map(withoutNulls<PeerTotals>);
  }
}
