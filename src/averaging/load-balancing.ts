import { MAX_PART_SHARE_FACTOR } from './constants.js';

/**
 * How much of the flattened tensor each peer reduces in a butterfly all-reduce: hivemind's
 * `load_balance_peers` (DeDLOC's LP). With n members, peer i reducing a fraction w_i moves
 * (1 − w_i) + (n − 1)·w_i = 1 + (n − 2)·w_i vector-lengths each way, so its time is
 * (1 + (n − 2)·w_i) ÷ b_i; the LP minimises the slowest peer's time ξ subject to Σw = 1, w ≥ 0,
 * w = 0 for client-mode peers (they cannot accept streams; hivemind gives them bandwidth 0) and
 * w ≤ MAX_PART_SHARE_FACTOR × an equal share (bandwidth is only declared: a peer declaring
 * 1e12 bytes/s would otherwise reduce, and could falsify, almost the whole vector). Its solution is
 * a water level: w_i = clamp((ξ·b_i − 1) ÷ (n − 2), 0, cap), so a peer whose 1/b_i alone exceeds ξ
 * (far slower than its group) reduces nothing.
 */
export interface PeerBandwidth {
  readonly peerId: string;
  /** Declared throughput in bytes/s; ignored for client-mode peers. */
  readonly bandwidth: number;
  readonly clientMode: boolean;
}

/**
 * Integer part sizes (same order as `peers`) summing to `total`: the LP's shares (above), rounded by
 * largest remainder. Every member computes this from the group description, so it only uses
 * arithmetic that gives the same result everywhere (no iterative solver, no tolerance).
 */
export function partSizes(total: number, peers: readonly PeerBandwidth[]): number[] {
  if (!Number.isSafeInteger(total) || total < 0) throw new RangeError(`vector size must be a non-negative integer, got ${total}`);
  const exact = partShares(peers).map((w) => w * total);
  const sizes = exact.map(Math.floor);
  // largest remainder: hand out what flooring left over, biggest fractions first (ties: lower index)
  const order = exact.map((x, i) => [x - Math.floor(x), i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  let left = total - sizes.reduce((a, b) => a + b, 0);
  for (const [, i] of order) {
    if (left === 0) break;
    if (exact[i]! > 0) {
      sizes[i]!++;
      left--;
    }
  }
  return sizes;
}

/** The LP's fractions w_i (same order as `peers`, summing to 1). */
export function partShares(peers: readonly PeerBandwidth[]): number[] {
  const b = peers.map((p) => (p.clientMode || !(p.bandwidth > 0) || !Number.isFinite(p.bandwidth) ? 0 : p.bandwidth));
  const reducers = b.filter((x) => x > 0).length;
  if (reducers === 0) {
    throw new Error(`no peer can reduce: all ${peers.length} peers are in client mode or declared no bandwidth; at least one peer that accepts connections is needed`);
  }
  const cap = Math.min(1, MAX_PART_SHARE_FACTOR / reducers);
  const k = peers.length - 2;
  // two members: each moves one vector-length each way whatever the split, so any split is optimal;
  // bandwidth proportions (capped) give the faster peer the larger share of the reduce arithmetic
  if (k <= 0) return waterFill(b, (level, x) => Math.min(cap, level * x), (x) => [cap / x]);
  return waterFill(b, (level, x) => Math.min(cap, Math.max(0, (level * x - 1) / k)), (x) => [1 / x, (1 + k * cap) / x]);
}

/**
 * The shares share(ξ, b_i) at the level ξ where they sum to 1. Each share is nondecreasing and
 * linear in ξ between its kinks, so the sum is piecewise linear: we find the two kinks around the
 * answer and interpolate, which is exact up to float rounding (and the same on every machine).
 */
function waterFill(b: readonly number[], share: (level: number, bandwidth: number) => number, kinksOf: (bandwidth: number) => number[]): number[] {
  const sum = (level: number): number => b.reduce((a, x) => a + (x > 0 ? share(level, x) : 0), 0);
  const levels = [0, ...new Set(b.filter((x) => x > 0).flatMap(kinksOf))].sort((p, q) => p - q);
  // the last kink saturates every reducer at the cap, and cap × reducers ≥ 1: the sum reaches 1 by then
  let lo = 0;
  let up = levels[levels.length - 1]!;
  for (const level of levels) {
    if (sum(level) >= 1) {
      up = level;
      break;
    }
    lo = level;
  }
  const [sLo, sUp] = [sum(lo), sum(up)];
  const level = sUp === sLo ? up : lo + ((1 - sLo) * (up - lo)) / (sUp - sLo);
  return b.map((x) => (x > 0 ? share(level, x) : 0));
}

/** [start, end) ranges of consecutive parts with the given sizes. */
export function partRanges(sizes: readonly number[]): Array<readonly [number, number]> {
  let start = 0;
  return sizes.map((size) => {
    const range = [start, start + size] as const;
    start += size;
    return range;
  });
}

/** Number of chunks a part of `size` values is streamed in, with at most `chunkValues` per chunk. */
export function chunkCount(size: number, chunkValues: number): number {
  return Math.ceil(size / chunkValues);
}

/** [start, end) of chunk `index` within a part of `size` values. */
export function chunkRange(size: number, chunkValues: number, index: number): readonly [number, number] {
  const start = index * chunkValues;
  if (index < 0 || start >= size) throw new RangeError(`chunk ${index} is outside a part of ${size} values`);
  return [start, Math.min(size, start + chunkValues)];
}
