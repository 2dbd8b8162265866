/**
 * How much of the flattened tensor each peer reduces in a butterfly all-reduce. Every reducer's
 * part crosses its link (n−1) times in and out, so time is minimised when parts are proportional
 * to bandwidth; client-mode peers cannot accept streams and reduce nothing (hivemind gives them
 * bandwidth 0 too).
 */
export interface PeerBandwidth {
  readonly peerId: string;
  /** Declared throughput in bytes/s; ignored for client-mode peers. */
  readonly bandwidth: number;
  readonly clientMode: boolean;
}

/** Integer part sizes (same order as `peers`) summing to `total`, proportional to bandwidth. */
export function partSizes(total: number, peers: readonly PeerBandwidth[]): number[] {
  if (!Number.isSafeInteger(total) || total < 0) throw new RangeError(`vector size must be a non-negative integer, got ${total}`);
  const shares = peers.map((p) => (p.clientMode || !(p.bandwidth > 0) || !Number.isFinite(p.bandwidth) ? 0 : p.bandwidth));
  const sum = shares.reduce((a, b) => a + b, 0);
  if (sum === 0) {
    throw new Error(`no peer can reduce: all ${peers.length} peers are in client mode or declared no bandwidth; at least one peer that accepts connections is needed`);
  }
  const exact = shares.map((s) => (s / sum) * total);
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
