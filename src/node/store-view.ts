import { z } from 'zod';
import { AVERAGING_MODES, type ChartSeries, type MyContribution, type PeerRow, type SeriesData, type SwarmState } from '../shared/api.js';
import type { Store } from '../store/index.js';
import type { StoredMetric } from '../store/metrics.js';
import { METRIC } from '../store/metric-series.js';

/** A peer counts as alive when it was seen this recently. */
const PEER_ALIVE_MS = 60_000;
/** Most points a chart gets in one answer (the newest ones). */
const MAX_CHART_POINTS = 2000;

const SELF = '';

/** The series each recorded number of the swarm view is the newest value of. */
const SWARM_SERIES = {
  peersAlive: METRIC.peersAlive,
  samplesPerSecond: METRIC.swarmSamplesPerSecond,
  epoch: METRIC.epoch,
  samplesAccumulated: METRIC.samplesAccumulated,
  targetBatchSize: METRIC.targetBatchSize,
  etaSeconds: METRIC.etaSeconds,
  lastLoss: METRIC.loss,
  averagingBusySeconds: METRIC.averagingBusySeconds,
  averagingBusySecondsPerGb: METRIC.averagingBusySecondsPerGb,
} satisfies Record<Exclude<keyof SwarmState, 'reachability' | 'updatedAt' | keyof EpochAveragingState>, string>;

type EpochAveragingState = Pick<SwarmState, 'averagingEpoch' | 'averagingMode' | 'averagingBytesSent' | 'averagingCompression'>;

/**
 * Read-only views of the store for the dashboard: the newest values of the series the training side
 * records (metric-series.ts), contribution per peer, and the peers table.
 */
export class StoreView {
  private readonly perPeer = new Map<string, { scannedRowid: number; byPeer: Map<string, { value: number; ts: number }> }>();

  constructor(private readonly store: Store) {}

  /**
   * Newest value of a series for every peer. Kept incrementally (only rows added since the last call
   * are read), because a coordinator's table grows by every peer's points and this runs every second.
   * Rows are appended; thinning and pruning delete only points a day or more older than the newest, so rowids only grow.
   */
  latestPerPeer(series: string): Map<string, number> {
    let cache = this.perPeer.get(series);
    if (!cache) this.perPeer.set(series, (cache = { scannedRowid: 0, byPeer: new Map() }));
    // upper bound first, so rows another process adds meanwhile are read next time, not skipped
    const upTo = (this.store.db.prepare('SELECT MAX(rowid) AS max FROM metrics').get() as { max: number | null }).max ?? 0;
    const rows = this.store.db
      .prepare('SELECT peer, value, ts FROM metrics WHERE rowid > ? AND rowid <= ? AND series = ?')
      .all(cache.scannedRowid, upTo, series) as Array<{ peer: string; value: number; ts: number }>;
    for (const r of rows) {
      const known = cache.byPeer.get(r.peer);
      if (!known || r.ts >= known.ts) cache.byPeer.set(r.peer, { value: r.value, ts: r.ts });
    }
    cache.scannedRowid = upTo;
    return new Map([...cache.byPeer].map(([peer, v]) => [peer, v.value]));
  }

  /** The swarm's numbers as recorded (this node's reachability is not a recorded number). */
  swarm(): Omit<SwarmState, 'reachability'> {
    const read = Object.entries(SWARM_SERIES).map(([key, series]) => [key, this.store.metrics.latest(series)] as const);
    const sent = this.store.metrics.latest(METRIC.averagingBytesSent);
    const times = [...read.flatMap(([, p]) => (p ? [p.ts] : [])), ...(sent ? [sent.ts] : [])];
    const numbers = Object.fromEntries(read.map(([key, p]) => [key, p?.value ?? null])) as Record<keyof typeof SWARM_SERIES, number | null>;
    return { ...numbers, ...this.epochAveraging(sent), updatedAt: times.length > 0 ? Math.max(...times) : null };
  }

  /** The figures the sink recorded for the epoch of `sent` (its latest bytes-sent point); an older epoch's compression is not this one's. */
  private epochAveraging(sent: StoredMetric | undefined): EpochAveragingState {
    if (sent === undefined) return { averagingEpoch: null, averagingMode: null, averagingBytesSent: null, averagingCompression: null };
    const mode = this.store.metrics.latest(METRIC.averagingMode); // its index in AVERAGING_MODES
    const compression = this.store.metrics.latest(METRIC.averagingCompression);
    return {
      averagingEpoch: sent.epoch,
      averagingMode: mode === undefined ? null : (AVERAGING_MODES[mode.value] ?? null),
      averagingBytesSent: sent.value,
      averagingCompression: compression !== undefined && compression.epoch === sent.epoch ? compression.value : null,
    };
  }

  /** This node's contribution as its own records show it (the leaderboard is the swarm's: leaderboard-view.ts). */
  mine(): Omit<MyContribution, 'leaderboard'> {
    const samples = this.latestPerPeer(METRIC.samples);
    const mySamples = samples.get(SELF) ?? 0;
    const total = [...samples.values()].reduce((a, b) => a + b, 0);
    const contributors = [...samples.values()].filter((v) => v > 0).length;
    return {
      samples: mySamples,
      computeHours: (this.store.metrics.latest(METRIC.computeSeconds)?.value ?? 0) / 3600,
      share: total > 0 ? mySamples / total : null,
      rank: mySamples > 0 ? 1 + [...samples.values()].filter((v) => v > mySamples).length : null,
      contributors,
      samplesPerSecond: this.store.metrics.latest(METRIC.samplesPerSecond)?.value ?? null,
    };
  }

  /** This node's view of a chart series: the newest points, oldest first. */
  series(series: ChartSeries, since = 0): SeriesData {
    const rows = this.store.db
      .prepare('SELECT ts, value FROM (SELECT ts, value, rowid FROM metrics WHERE series = ? AND peer = ? AND ts >= ? ORDER BY ts DESC, rowid DESC LIMIT ?) ORDER BY ts, rowid')
      .all(series, SELF, since, MAX_CHART_POINTS) as Array<{ ts: number; value: number }>;
    return { series, t: rows.map((r) => r.ts / 1000), v: rows.map((r) => r.value) };
  }

  /**
   * Most recently seen first; ties by id, so rows do not swap places between refreshes. A peer this
   * node is connected to is seen now: the store has when it identified and when its progress was read,
   * and a coordinator (which reports no progress) identifies once per connection.
   */
  peers(now = Date.now(), connected: readonly string[] = []): PeerRow[] {
    const open = new Set(connected);
    const seen = this.store.peers.list(200).map((p) => (open.has(p.peerId) ? { ...p, lastSeen: now } : p));
    return seen
      .sort((a, b) => b.lastSeen - a.lastSeen || (a.peerId < b.peerId ? -1 : 1))
      .map((p) => {
        const info = PeerInfoSchema.safeParse(p.info);
        const parsed = info.success ? info.data : {};
        return {
          peerId: p.peerId,
          samplesPerSecond: parsed.samplesPerSecond ?? null,
          mode: parsed.clientMode === undefined ? 'unknown' : parsed.clientMode ? 'client' : 'relay',
          lastSeen: p.lastSeen,
          alive: now - p.lastSeen <= PEER_ALIVE_MS,
        };
      });
  }
}

/** The fields of a stored peer's `info` the dashboard shows; anything else is ignored. */
const PeerInfoSchema = z.object({
  samplesPerSecond: z.number().finite().nonnegative().optional(),
  clientMode: z.boolean().optional(),
});
