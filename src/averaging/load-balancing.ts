import { MAX_PART_SHARE_FACTOR } from './constants.js';

/**
 * How much of the flattened tensor each peer reduces in a butterfly all-reduce. Every reducer's
 * part crosses its link (n−1) times in and out, so time is minimised when parts are proportional
 * to bandwidth; client-mode peers cannot accept streams and reduce nothing (hivemind gives them
 * bandwidth 0 too). Bandwidth is only declared, so no reducer gets more than
 * MAX_PART_SHARE_FACTOR × an equal share: a peer declaring 1e12 bytes/s would otherwise reduce
 * (and could falsify) almost the whole vector.
 */
export interface PeerBandwidth {
  readonly peerId: string;
  /** Declared throughput in bytes/s; ignored for client-mode peers. */
  readonly bandwidth: number;
  readonly clientMode: boolean;
}

/**
 * Integer part sizes (same order as `peers`) summing to `total`, proportional to bandwidth but none
 * above MAX_PART_SHARE_FACTOR / (peers that can reduce) of the total (what a capped part sheds goes
 * to the others in proportion). Every member computes this from the group description, so it only
 * uses arithmetic that gives the same result everywhere.
 */
export function partSizes(total: number, peers: readonly PeerBandwidth[]): number[] {
  if (!Number.isSafeInteger(total) || total < 0) throw new RangeError(`vector size must be a non-negative integer, got ${total}`);
  const shares = peers.map((p) => (p.clientMode || !(p.bandwidth > 0) || !Number.isFinite(p.bandwidth) ? 0 : p.bandwidth));
  const reducers = shares.filter((s) => s > 0).length;
  if (reducers === 0) {
    throw new Error(`no peer can reduce: all ${peers.length} peers are in client mode or declared no bandwidth; at least one peer that accepts connections is needed`);
  }
  const cap = Math.min(1, MAX_PART_SHARE_FACTOR / reducers) * total;
  const exact = shares.map(() => 0);
  const capped = new Set<number>();
  // water-filling: each pass caps at least one more part, or settles
  for (let pass = 0; pass < peers.length; pass++) {
    const free = shares.map((_, i) => i).filter((i) => shares[i]! > 0 && !capped.has(i));
    const sum = free.reduce((a, i) => a + shares[i]!, 0);
    const left = total - capped.size * cap;
    for (const i of free) exact[i] = (shares[i]! / sum) * left;
    const over = free.filter((i) => exact[i]! > cap);
    if (over.length === 0) break;
    for (const i of over) {
      exact[i] = cap;
      capped.add(i);
    }
  }
  const sizes = exact.map(Math.floor);
  // largest remainder: hand out what flooring left over, biggest fractions first (ties: lower index)
  const order = exact.map((x, i) => [x - Math.floor(x), i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  let left = total - sizes.reduce((a, b) => a + b, 0);
  for (const [, i] of order) {
    if (left === 0) break;
    if (shares[i]! > 0) {
      sizes[i]!++;
      left--;
    }
  }
  return sizes;
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
