import type { Database } from 'better-sqlite3';

export interface MetricPoint {
  readonly series: string;
  readonly value: number;
  /** Milliseconds since the epoch; defaults to now. */
  readonly ts?: number;
  /** Peer the value belongs to ('' = this node). */
  readonly peer?: string;
  readonly epoch?: number;
}

export interface StoredMetric {
  readonly series: string;
  readonly ts: number;
  readonly value: number;
  readonly peer: string;
  readonly epoch: number | null;
}

/** Time series of numbers (loss, samples/s, peers alive, …) for the dashboard and exports. */
export class MetricsStore {
  constructor(private readonly db: Database) {}

  record(points: readonly MetricPoint[]): void {
    const insert = this.db.prepare('INSERT INTO metrics (series, ts, value, peer, epoch) VALUES (?, ?, ?, ?, ?)');
    const now = Date.now();
    this.db.transaction(() => {
      for (const p of points) {
        if (!Number.isFinite(p.value)) throw new RangeError(`metric ${p.series}: value ${p.value} is not a finite number`);
        insert.run(p.series, p.ts ?? now, p.value, p.peer ?? '', p.epoch ?? null);
      }
    })();
  }

  /** Points of one series in time order, optionally since `since` (ms) and for one peer. */
  query(series: string, options: { since?: number; peer?: string; limit?: number } = {}): StoredMetric[] {
    const clauses = ['series = ?', 'ts >= ?'];
    const args: unknown[] = [series, options.since ?? 0];
    if (options.peer !== undefined) {
      clauses.push('peer = ?');
      args.push(options.peer);
    }
    args.push(options.limit ?? -1);
    return this.db.prepare(`SELECT series, ts, value, peer, epoch FROM metrics WHERE ${clauses.join(' AND ')} ORDER BY ts, rowid LIMIT ?`).all(...args) as StoredMetric[];
  }

  /** Points of several series (default: all) in time order, optionally since `since` (ms), read lazily: what exports stream. */
  iteratePoints(options: { series?: readonly string[]; since?: number } = {}): IterableIterator<StoredMetric> {
    const args: unknown[] = [options.since ?? 0];
    let bySeries = '';
    if (options.series !== undefined) {
      bySeries = `AND series IN (${options.series.map(() => '?').join(', ')})`;
      args.push(...options.series);
    }
    return this.db.prepare(`SELECT series, ts, value, peer, epoch FROM metrics WHERE ts >= ? ${bySeries} ORDER BY ts, rowid`).iterate(...args) as IterableIterator<StoredMetric>;
  }

  /** The newest point of a series for one peer ('' = this node). */
  latest(series: string, peer = ''): StoredMetric | undefined {
    return this.db.prepare('SELECT series, ts, value, peer, epoch FROM metrics WHERE series = ? AND peer = ? ORDER BY ts DESC, rowid DESC LIMIT 1').get(series, peer) as StoredMetric | undefined;
  }

  seriesNames(): string[] {
    return (this.db.prepare('SELECT DISTINCT series FROM metrics ORDER BY series').all() as Array<{ series: string }>).map((r) => r.series);
  }
}
