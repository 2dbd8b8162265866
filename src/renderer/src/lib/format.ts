// Number formatting for the dashboard: fixed decimals so values do not change width as they update.
import { AVERAGING_MODE_NAMES, type DataFetchProgress, type MyContribution, type NodeReachability, type SwarmState } from '../../../shared/api.js';

const integer = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

export const DASH = '—';

export function formatInteger(n: number | null): string {
  return n === null ? DASH : integer.format(Math.round(n));
}

export function formatFixed(n: number | null, digits: number): string {
  return n === null ? DASH : n.toFixed(digits);
}

export function formatPercent(fraction: number | null): string {
  return fraction === null ? DASH : `${(fraction * 100).toFixed(1)} %`;
}

/**
 * The contribution panel's share of the run and rank; null while this node is the only contributor it
 * knows of and no coordinator's leaderboard was found (training alone, or just joined: "100.0 %" and
 * "#1 of 1" would say nothing true about a run).
 */
export function formatStanding(mine: Pick<MyContribution, 'share' | 'rank' | 'contributors' | 'leaderboard'>): { share: string; rank: string } | null {
  if (mine.leaderboard === null && mine.contributors <= 1) return null;
  return { share: formatPercent(mine.share), rank: mine.rank === null ? DASH : `#${mine.rank} of ${mine.contributors}` };
}

/** 75 → "1 min 15 s", 7260 → "2 h 01 min". */
export function formatDuration(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds) || seconds < 0) return DASH;
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}

/** "12 s ago" style age of a timestamp (ms). */
export function formatAge(ts: number | null, now: number): string {
  if (ts === null) return DASH;
  return `${formatDuration(Math.max(0, (now - ts) / 1000))} ago`;
}

/** Progress toward the target batch as a 0..1 fraction, or null when either number is unknown. */
export function batchProgress(accumulated: number | null, target: number | null): number | null {
  if (accumulated === null || target === null || target <= 0) return null;
  return Math.min(1, Math.max(0, accumulated / target));
}

/** Seconds left of an estimate made at `madeAt` (ms), counting down between updates; never below 0. */
export function remainingSeconds(eta: number | null, madeAt: number | null, now: number): number | null {
  if (eta === null || madeAt === null) return null;
  return Math.max(0, eta - Math.max(0, now - madeAt) / 1000);
}

/**
 * The swarm panel's averaging line: the run's mode, what this node's all-reduces of its latest epoch sent
 * and their compression, then the CPU its latest all-reduce took from training, each part when known:
 * "PowerSGD, 0.41 MB sent in epoch 12, 9.8× fewer values; 0.41 CPU-s per round (1.2 s/GB)", or
 * "no round yet" (said once).
 */
export function describeAveraging(s: Pick<SwarmState, 'averagingEpoch' | 'averagingMode' | 'averagingCompression' | 'averagingBytesSent' | 'averagingBusySeconds' | 'averagingBusySecondsPerGb'>): string {
  const parts = [epochAveraging(s), averagingCpu(s.averagingBusySeconds, s.averagingBusySecondsPerGb)];
  const known = parts.filter((p) => p !== undefined);
  return known.length === 0 ? 'no round yet' : known.join('; ');
}

/** The CPU this node's latest all-reduce took from training: "0.41 CPU-s per round (1.2 s/GB)". */
function averagingCpu(busySeconds: number | null, perGb: number | null): string | undefined {
  if (busySeconds === null) return undefined;
  return perGb === null ? `${busySeconds.toFixed(2)} CPU-s per round` : `${busySeconds.toFixed(2)} CPU-s per round (${perGb.toFixed(1)} s/GB)`;
}

/**
 * The run's mode and its latest epoch's averaging: "PowerSGD, 0.41 MB sent in epoch 12, 9.8× fewer values",
 * "DiLoCo, 4.00 MB sent in epoch 3", "plain, nothing averaged in epoch 7", "PowerSGD, 0.20 MB sent in
 * epoch 8, nothing averaged" (a failed PowerSGD phase).
 */
function epochAveraging(s: Pick<SwarmState, 'averagingEpoch' | 'averagingMode' | 'averagingCompression' | 'averagingBytesSent'>): string | undefined {
  if (s.averagingMode === null || s.averagingBytesSent === null || s.averagingEpoch === null) return undefined;
  const mode = AVERAGING_MODE_NAMES[s.averagingMode];
  const sent = `${(s.averagingBytesSent / 1e6).toFixed(2)} MB sent in epoch ${s.averagingEpoch}`;
  const c = s.averagingCompression;
  if (c === null) return s.averagingBytesSent > 0 ? `${mode}, ${sent}, nothing averaged` : `${mode}, nothing averaged in epoch ${s.averagingEpoch}`;
  return `${mode}, ${sent}${c > 1 ? `, ${c.toFixed(1)}× fewer values` : ''}`;
}

/** A long peer id shortened in the middle, keeping both ends recognisable. */
export function shortPeerId(id: string): string {
  return id.length <= 16 ? id : `${id.slice(0, 8)}…${id.slice(-6)}`;
}

const REACHABILITY_WORDS: Record<NodeReachability, string> = {
  public: 'public — serving the DHT',
  private: 'private — reachable through relays',
  unknown: 'unknown — a DHT client until other peers confirm it can be reached',
};

/** This node's reachability in words, as the Swarm panel shows it. */
export function describeReachability(r: NodeReachability | null): string {
  return r === null ? 'not in a swarm' : REACHABILITY_WORDS[r];
}

/** The run data's fetch in one line: "12.0 of 48.0 MB (25 %) · 6/24 shards · 4.1 MB/s · 9 s left" ("done" once every shard arrived). */
export function formatFetch(p: DataFetchProgress): string {
  const mb = (bytes: number) => (bytes / 1024 ** 2).toFixed(1);
  const pct = p.totalBytes > 0 ? ` (${Math.floor((100 * p.bytes) / p.totalBytes)} %)` : '';
  const left = p.shardsDone === p.shardsTotal ? 'done' : p.etaSeconds === null ? 'time left unknown' : `${formatDuration(p.etaSeconds)} left`;
  return `${mb(p.bytes)} of ${mb(p.totalBytes)} MB${pct} · ${p.shardsDone}/${p.shardsTotal} shards · ${mb(p.bytesPerSecond)} MB/s · ${left}`;
}
