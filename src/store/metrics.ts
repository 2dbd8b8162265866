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

/** Why a point cannot be stored, or undefined when it can. */
function invalidMetric(p: MetricPoint): string | undefined {
  if (p.series.length === 0 || p.series.length > 128) return `metric "${p.series.slice(0, 128)}": the series name must be 1–128 characters`;
  if (!Number.isFinite(p.value)) return `metric ${p.series}: value ${p.value} is not a finite number`;
  if (p.ts !== undefined && !Number.isFinite(p.ts)) return `metric ${p.series}: timestamp ${p.ts} is not a finite number`;
  if (p.epoch !== undefined && !(Number.isSafeInteger(p.epoch) && p.epoch >= 0)) return `metric ${p.series}: epoch ${p.epoch} is not an epoch`;
  return undefined;
}

/**
 * How long a node's metric points are kept as recorded: older ones are thinned to the last point of
 * each series, peer and `thinnedEveryMs` (a peer records ~15 points a second, ~150 MB a day; thinned,
 * a day is ~2 MB), so a run of weeks keeps its whole loss curve and every cumulative total's newest
 * value. `record` thins at most every `passEveryMs`, at most `passSpanMs` of points a pass (a whole
 * number of buckets): a pass blocks the thread that records (a training loop), and 10 minutes of a
 * store that was never thinned took 20–80 ms on a loaded 2-core machine, so such a backlog is thinned an
 * hour of points a minute.
 */
export const METRICS_RETENTION = { fullResolutionMs: 24 * 3_600_000, thinnedEveryMs: 60_000, passEveryMs: 10_000, passSpanMs: 10 * 60_000 } as const;

/** Where skipped points are reported when the store's opener gives nowhere else: Node prints process warnings on stderr. */
const warnProcess = (message: string): void => process.emitWarning(message, 'CohortMetricWarning');

/** Time series of numbers (loss, samples/s, peers alive, …) for the dashboard and exports. */
export class MetricsStore {
  /** Points before this time (ms) are thinned. */
  private thinnedTo = -Infinity;
  private lastThin = -Infinity;

  constructor(
    private readonly db: Database,
    /** Told about each point `record` skipped. */
    private readonly onInvalid: (message: string) => void = warnProcess,
  ) {}

  /**
   * Stores the valid points in one transaction; an invalid one (a value other peers reported can be
   * anything) is reported to `onInvalid` and skipped, never thrown into the training loop or the
   * coordinator's poll that records it.
   */
  record(points: readonly MetricPoint[]): void {
    const insert = this.db.prepare('INSERT INTO metrics (series, ts, value, peer, epoch) VALUES (?, ?, ?, ?, ?)');
    const now = Date.now();
    const valid = points.filter((p) => {
      const why = invalidMetric(p);
      if (why !== undefined) this.onInvalid(`${why}; point skipped`);
      return why === undefined;
    });
    this.db.transaction(() => {
      for (const p of valid) insert.run(p.series, p.ts ?? now, p.value, p.peer ?? '', p.epoch ?? null);
    })();
    if (now - this.lastThin >= METRICS_RETENTION.passEveryMs) {
      this.lastThin = now;
      this.thin(now);
    }
  }

  /**
   * Thins the next span of points older than METRICS_RETENTION.fullResolutionMs before `now`: of each
   * series, peer and METRICS_RETENTION.thinnedEveryMs bucket only the last recorded point stays (the
   * newest value of a cumulative series, a point of the loss curve). Returns how many were deleted.
   */
  thin(now = Date.now()): number {
    const bucket = METRICS_RETENTION.thinnedEveryMs;
    const cutoff = Math.floor((now - METRICS_RETENTION.fullResolutionMs) / bucket) * bucket;
    // from the oldest point not thinned yet: a stretch without points (a node stopped for weeks, a
    // point stamped by a clock that was years behind) costs no passes
    const next = this.db.prepare('SELECT min(ts) FROM metrics WHERE ts >= ?').pluck().get(this.thinnedTo) as number | null;
    if (next === null) return 0;
    const from = Math.floor(next / bucket) * bucket;
    const to = Math.min(cutoff, from + METRICS_RETENTION.passSpanMs);
    if (to <= from) return 0;
    this.thinnedTo = to;
    return this.db
      .prepare('DELETE FROM metrics WHERE ts >= @from AND ts < @to AND rowid NOT IN (SELECT max(rowid) FROM metrics WHERE ts >= @from AND ts < @to GROUP BY series, peer, CAST((ts - @from) / @bucket AS INTEGER))')
      .run({ from, to, bucket }).changes;
  }

  /**
   * Deletes other peers' points (peer ≠ '') older than `before` (ms); this node's own series are kept.
   * What bounds a coordinator's table: it records a few points per reporting peer on every look.
   * Returns how many were deleted.
   */
  prunePeers(before: number): number {
    return this.db.prepare("DELETE FROM metrics WHERE peer != '' AND ts < ?").run(before).changes;
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
