// Number formatting for the dashboard: fixed decimals so values do not change width as they update.
import type { AveragingMode, DataFetchProgress, NodeReachability, SwarmState } from '../../../shared/api.js';

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
 * The swarm panel's averaging line: how this node's latest all-reduce averaged, what it sent and the CPU
 * it took from training, each part when known: "PowerSGD, 9.8× fewer values, 0.41 MB sent; 0.41 CPU-s per
 * round (1.2 s/GB)", or "no round yet" (said once).
 */
export function describeAveraging(s: Pick<SwarmState, 'averagingMode' | 'averagingCompression' | 'averagingBytesSent' | 'averagingBusySeconds' | 'averagingBusySecondsPerGb'>): string {
  const parts = [averagingMode(s.averagingMode, s.averagingCompression, s.averagingBytesSent), averagingCpu(s.averagingBusySeconds, s.averagingBusySecondsPerGb)];
  const known = parts.filter((p) => p !== undefined);
  return known.length === 0 ? 'no round yet' : known.join('; ');
}

/** The CPU this node's latest all-reduce took from training: "0.41 CPU-s per round (1.2 s/GB)". */
function averagingCpu(busySeconds: number | null, perGb: number | null): string | undefined {
  if (busySeconds === null) return undefined;
  return perGb === null ? `${busySeconds.toFixed(2)} CPU-s per round` : `${busySeconds.toFixed(2)} CPU-s per round (${perGb.toFixed(1)} s/GB)`;
}

/** How this node's latest all-reduce averaged and what it sent: "PowerSGD, 9.8× fewer values, 0.41 MB sent", "DiLoCo, 4.00 MB sent", "plain, 4.00 MB sent". */
function averagingMode(mode: AveragingMode | null, compression: number | null, bytesSent: number | null): string | undefined {
  if (mode === null || compression === null || bytesSent === null) return undefined;
  const sent = `${(bytesSent / 1e6).toFixed(2)} MB sent`;
  if (mode === 'powersgd') return `PowerSGD, ${compression.toFixed(1)}× fewer values, ${sent}`;
  return `${mode === 'diloco' ? 'DiLoCo' : 'plain'}, ${sent}`;
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
