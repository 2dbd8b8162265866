import { CLOCK_SKEW_MS } from '../swarm/constants.js';

/**
 * Swarm progress as hivemind's ProgressTracker computes it: every peer publishes how many samples
 * it accumulated in the current epoch and its throughput; everyone derives the same global view,
 * the ETA to `targetBatchSize`, and how soon to look again.
 */
export interface PeerProgress {
  readonly peerId: string;
  readonly epoch: number;
  /** Samples accumulated since this peer's current epoch began. */
  readonly samples: number;
  readonly samplesPerSecond: number;
  /** When the peer measured this (ms since the Unix epoch). */
  readonly time: number;
  readonly clientMode: boolean;
  /** The peer stopped training: its epoch is still the run's, but it adds no samples, throughput or peer. */
  readonly left?: boolean;
}

/**
 * Realistic ranges of what one peer reports (the progress record's schema enforces them, and
 * `globalProgress` clamps to them, so sums over any number of reports stay finite): a fast GPU peer
 * does thousands of samples/s, not millions.
 */
export const PROGRESS_LIMITS = {
  samplesPerSecond: 1e6,
  /** Samples in one epoch. */
  samples: 1e9,
  /** Cumulative samples over the run. */
  totalSamples: 1e13,
  /** Cumulative seconds of compute (about 3,000 years). */
  computeSeconds: 1e11,
  /** A step's mean loss (ALBERT's starts near ln(vocab) ≈ 10). */
  loss: 1e6,
  /** A report older than this counts no more (a training peer republishes every few seconds). */
  maxAgeMs: 10 * 60_000,
} as const;

/** Whether a report's measurement time lies within [now − maxAgeMs, now + the swarm's tolerated clock skew]. */
export function reportTimeIsCurrent(time: number, now: number): boolean {
  return time <= now + CLOCK_SKEW_MS && time >= now - PROGRESS_LIMITS.maxAgeMs;
}

export interface GlobalProgress {
  /** The swarm's epoch: the highest any peer reports (one that left included: the run got there). */
  readonly epoch: number;
  /**
   * Samples the peers at that epoch reported (this peer's own count as it stands): what the swarm
   * accumulated toward the target, the figure every display shows (hivemind's samples_accumulated,
   * which its log line prints). It grows only as peers report, so it holds while the swarm averages.
   */
  readonly samples: number;
  /**
   * The same, extrapolated to `now` with each peer's throughput: for the ETA and readyForStep only,
   * never shown. No peer reports while the swarm averages, so it grows past the target there (a
   * status printed "accumulated 394 of 32 samples" with it).
   */
  readonly estimatedSamples: number;
  readonly samplesPerSecond: number;
  readonly peers: number;
  readonly targetBatchSize: number;
  /** Seconds until the swarm is expected to reach the target (0 if it has). */
  readonly eta: number;
  /** Seconds until progress should be fetched again. */
  readonly refreshIn: number;
}

export interface ProgressOptions {
  readonly targetBatchSize: number;
  readonly minRefreshSeconds?: number;
  readonly maxRefreshSeconds?: number;
  /** hivemind's expected_drift_peers / expected_drift_rate: how many peers may join before the next look. */
  readonly expectedDriftPeers?: number;
  readonly expectedDriftRate?: number;
}

/**
 * Combines peers' reports (this peer's own included). Peers one epoch behind still count towards
 * throughput, as in hivemind: they are about to catch up and contribute. Each report's numbers are
 * clamped to PROGRESS_LIMITS and extrapolated over at most `maxAgeMs`, so no report makes a sum
 * non-finite.
 */
export function globalProgress(reports: readonly PeerProgress[], now: number, options: ProgressOptions): GlobalProgress {
  const { targetBatchSize, minRefreshSeconds = 0.5, maxRefreshSeconds = 30, expectedDriftPeers = 3, expectedDriftRate = 0.2 } = options;
  if (reports.length === 0) {
    return { epoch: 0, samples: 0, estimatedSamples: 0, samplesPerSecond: 0, peers: 0, targetBatchSize, eta: Infinity, refreshIn: minRefreshSeconds };
  }
  const epoch = Math.max(...reports.map((r) => r.epoch));
  const live = reports.filter((r) => r.left !== true);
  let samples = 0;
  let estimatedSamples = 0;
  let samplesPerSecond = 0;
  for (const r of live) {
    const rate = clamp(r.samplesPerSecond, PROGRESS_LIMITS.samplesPerSecond);
    samplesPerSecond += rate;
    if (r.epoch !== epoch) continue;
    const own = clamp(r.samples, PROGRESS_LIMITS.samples);
    samples += own;
    estimatedSamples += own + (clamp(now - r.time, PROGRESS_LIMITS.maxAgeMs) / 1000) * rate;
  }
  const remaining = Math.max(0, targetBatchSize - estimatedSamples);
  const eta = remaining === 0 ? 0 : samplesPerSecond > 0 ? remaining / samplesPerSecond : Infinity;
  const peers = live.length;
  const expectedMaxPeers = Math.max(peers + expectedDriftPeers, peers * (1 + expectedDriftRate));
  const refreshIn = Math.min(maxRefreshSeconds, Math.max(minRefreshSeconds, Number.isFinite(eta) ? (eta * peers) / expectedMaxPeers : maxRefreshSeconds));
  return { epoch, samples, estimatedSamples, samplesPerSecond, peers, targetBatchSize, eta, refreshIn };
}

/** `x` within [0, max]; NaN counts as 0. */
function clamp(x: number, max: number): number {
  return x > 0 ? Math.min(x, max) : 0;
}

/** The line volunteers know from hivemind. */
export function progressLine(p: GlobalProgress): string {
  const eta = Number.isFinite(p.eta) ? p.eta.toFixed(2) : 'unknown';
  return `Collaboration accumulated ${p.samples} samples from ${p.peers} peers; ETA ${eta} seconds (refresh in ${p.refreshIn.toFixed(2)} s)`;
}

/** Whether the swarm has gathered enough samples for the next step, or is within `batchSizeLead` samples of it. */
export function readyForStep(p: GlobalProgress, batchSizeLead = 0): boolean {
  return p.estimatedSamples >= p.targetBatchSize - batchSizeLead;
}
