import type { Database } from 'better-sqlite3';

/** One optimizer step of one peer, as a coordinator credited it. */
export interface CreditRow {
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

/** A peer's credits summed over the steps credited. */
export interface PeerTotals {
  readonly peerId: string;
  /** The display name of its newest credited step. */
  readonly displayName?: string;
  readonly claimed: number;
  readonly credited: number;
  readonly computeSeconds: number;
  readonly steps: number;
  readonly flaggedSteps: number;
}

interface CreditDbRow {
  peer_id: string;
  epoch: number;
  display_name: string | null;
  claimed: number;
  credited: number;
  compute_seconds: number;
  flag: string | null;
  ts: number;
}

/**
 * A coordinator's contribution accounting: each credited step once per (peer, epoch), and the
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
        .prepare('INSERT OR IGNORE INTO contribution_credits (peer_id, epoch, display_name, claimed, credited, compute_seconds, flag, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
        .run(row.peerId, row.epoch, row.displayName ?? null, row.claimed, row.credited, row.computeSeconds, row.flag ?? null, row.ts).changes;
      if (inserted === 0) return false;
      this.db
        .prepare(
          `INSERT INTO contribution_peers (peer_id, display_name, time, total_samples, epoch, samples_in_epoch, compute_seconds) VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (peer_id) DO UPDATE SET display_name = excluded.display_name, time = excluded.time, total_samples = excluded.total_samples,
             epoch = excluded.epoch, samples_in_epoch = excluded.samples_in_epoch, compute_seconds = excluded.compute_seconds`,
        )
        .run(row.peerId, row.displayName ?? null, baseline.time, baseline.totalSamples, baseline.epoch, baseline.samplesInEpoch, baseline.computeSeconds);
      return true;
    })();
  }

  isCredited(peerId: string, epoch: number): boolean {
    return this.db.prepare('SELECT 1 FROM contribution_credits WHERE peer_id = ? AND epoch = ?').get(peerId, epoch) !== undefined;
  }

  /** Every peer's baseline as of its last credited step. */
  baselines(): Map<string, ThroughputBaseline> {
    const rows = this.db.prepare('SELECT peer_id, time, total_samples, epoch, samples_in_epoch, compute_seconds FROM contribution_peers').all() as Array<{
      peer_id: string;
      time: number;
      total_samples: number;
      epoch: number;
      samples_in_epoch: number;
      compute_seconds: number;
    }>;
    return new Map(rows.map((r) => [r.peer_id, { time: r.time, totalSamples: r.total_samples, epoch: r.epoch, samplesInEpoch: r.samples_in_epoch, computeSeconds: r.compute_seconds }]));
  }

  /** Display name per peer (as of its last credited step; peers without one are absent). */
  displayNames(): Map<string, string> {
    const rows = this.db.prepare('SELECT peer_id, display_name FROM contribution_peers WHERE display_name IS NOT NULL').all() as Array<{ peer_id: string; display_name: string }>;
    return new Map(rows.map((r) => [r.peer_id, r.display_name]));
  }

  /** Credited steps in the order they were credited, optionally since `since` (ms) and only the flagged ones. */
  credits(options: { since?: number; flaggedOnly?: boolean } = {}): CreditRow[] {
    const rows = this.db
      .prepare(`SELECT * FROM contribution_credits WHERE ts >= ? ${options.flaggedOnly ? 'AND flag IS NOT NULL' : ''} ORDER BY ts, rowid`)
      .all(options.since ?? 0) as CreditDbRow[];
    return rows.map((r) => ({
      peerId: r.peer_id,
      epoch: r.epoch,
      ...(r.display_name !== null ? { displayName: r.display_name } : {}),
      claimed: r.claimed,
      credited: r.credited,
      computeSeconds: r.compute_seconds,
      ...(r.flag !== null ? { flag: r.flag } : {}),
      ts: r.ts,
    }));
  }

  /** Per-peer sums of the steps credited since `since` (ms; default: all), most credited first. */
  totals(options: { since?: number } = {}): PeerTotals[] {
    const rows = this.db
      .prepare(
        `SELECT peer_id, SUM(claimed) AS claimed, SUM(credited) AS credited, SUM(compute_seconds) AS compute_seconds, COUNT(*) AS steps, COUNT(flag) AS flagged,
           (SELECT display_name FROM contribution_credits n WHERE n.peer_id = c.peer_id ORDER BY n.ts DESC, n.rowid DESC LIMIT 1) AS display_name
         FROM contribution_credits c WHERE ts >= ? GROUP BY peer_id ORDER BY credited DESC, peer_id`,
      )
      .all(options.since ?? 0) as Array<{ peer_id: string; claimed: number; credited: number; compute_seconds: number; steps: number; flagged: number; display_name: string | null }>;
    return rows.map((r) => ({
      peerId: r.peer_id,
      ...(r.display_name !== null ? { displayName: r.display_name } : {}),
      claimed: r.claimed,
      credited: r.credited,
      computeSeconds: r.compute_seconds,
      steps: r.steps,
      flaggedSteps: r.flagged,
    }));
  }
}
