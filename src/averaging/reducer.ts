import { chunkCount, chunkRange } from './load-balancing.js';

/** A sender broke the rules for its part; the caller excludes that peer from the round and logs why. */
export class PeerFault extends Error {
  override readonly name = 'PeerFault';
  constructor(
    readonly peerId: string,
    message: string,
  ) {
    super(`peer ${peerId}: ${message}`);
  }
}

export interface ReducerLimits {
  /** Values with a larger magnitude are treated as an attack or a bug, not averaged. */
  readonly maxAbs: number;
}

export const DEFAULT_LIMITS: ReducerLimits = { maxAbs: 1e8 };

/**
 * Averages one part of the flattened tensor as its senders stream it in chunks, weighting each
 * sender by the samples it contributed. Each chunk is averaged over the senders that delivered it,
 * so a sender that vanishes mid-round leaves the chunks it sent in and the rest without it; bad
 * data (wrong length, out of order, NaN/Inf, absurd magnitude) never enters the sum.
 */
export class PartReducer {
  private readonly sum: Float32Array;
  private readonly weightPerChunk: Float64Array;
  private readonly delivered = new Map<string, number>();
  private readonly excluded = new Map<string, string>();
  readonly chunks: number;

  private readonly weights: ReadonlyMap<string, number>;

  constructor(
    readonly size: number,
    readonly chunkValues: number,
    weights: ReadonlyMap<string, number>,
    private readonly limits: ReducerLimits = DEFAULT_LIMITS,
  ) {
    for (const [peer, w] of weights) if (!(w >= 0) || !Number.isFinite(w)) throw new RangeError(`peer ${peer}: weight ${w} must be a finite non-negative number`);
    // normalised weights keep the float32 running sum at the scale of the average, not of the sample counts
    const total = [...weights.values()].reduce((a, b) => a + b, 0);
    this.weights = new Map([...weights].map(([peer, w]) => [peer, total > 0 ? w / total : 0]));
    this.sum = new Float32Array(size);
    this.chunks = chunkCount(size, chunkValues);
    this.weightPerChunk = new Float64Array(this.chunks);
    for (const peer of weights.keys()) this.delivered.set(peer, 0);
  }

  /** Adds the next chunk from `peer`; throws PeerFault (and adds nothing) if it is not acceptable. */
  add(peer: string, chunkIndex: number, values: Float32Array): void {
    const next = this.delivered.get(peer);
    if (next === undefined) throw new PeerFault(peer, 'is not a sender of this part');
    if (this.excluded.has(peer)) throw new PeerFault(peer, `was excluded (${this.excluded.get(peer)})`);
    if (chunkIndex !== next) throw new PeerFault(peer, `sent chunk ${chunkIndex}, expected chunk ${next}`);
    if (chunkIndex >= this.chunks) throw new PeerFault(peer, `sent chunk ${chunkIndex} of a part with ${this.chunks} chunks`);
    const [start, end] = chunkRange(this.size, this.chunkValues, chunkIndex);
    if (values.length !== end - start) throw new PeerFault(peer, `chunk ${chunkIndex} has ${values.length} values, expected ${end - start}`);
    for (let i = 0; i < values.length; i++) {
      const v = values[i]!;
      if (!Number.isFinite(v)) throw new PeerFault(peer, `chunk ${chunkIndex} holds a non-finite value (${v}) at ${start + i}`);
      if (Math.abs(v) > this.limits.maxAbs) throw new PeerFault(peer, `chunk ${chunkIndex} holds ${v} at ${start + i}, beyond the ±${this.limits.maxAbs} limit`);
    }
    const w = this.weights.get(peer)!;
    if (w > 0) {
      const target = this.sum.subarray(start, end);
      for (let i = 0; i < values.length; i++) target[i]! += w * values[i]!;
    }
    this.weightPerChunk[chunkIndex]! += w;
    this.delivered.set(peer, next + 1);
  }

  /** Stops waiting for `peer`; what it already delivered stays in. */
  exclude(peer: string, reason: string): void {
    if (this.delivered.has(peer) && !this.excluded.has(peer)) this.excluded.set(peer, reason);
  }

  excludedPeers(): ReadonlyMap<string, string> {
    return this.excluded;
  }

  /** Senders that still owe chunk `index`. */
  pending(index: number): string[] {
    return [...this.delivered].filter(([peer, n]) => n <= index && !this.excluded.has(peer)).map(([peer]) => peer);
  }

  isChunkDone(index: number): boolean {
    return this.pending(index).length === 0;
  }

  isDone(): boolean {
    return this.chunks === 0 || this.isChunkDone(this.chunks - 1);
  }

  /** The weighted average of chunk `index`; throws if senders are still pending or nobody with weight delivered it. */
  chunkAverage(index: number): Float32Array {
    const waiting = this.pending(index);
    if (waiting.length > 0) throw new Error(`chunk ${index} is still waiting for ${waiting.join(', ')}`);
    const total = this.weightPerChunk[index]!;
    if (!(total > 0)) throw new Error(`chunk ${index}: no sender with a positive weight delivered it`);
    const [start, end] = chunkRange(this.size, this.chunkValues, index);
    const out = new Float32Array(end - start);
    for (let i = 0; i < out.length; i++) out[i] = this.sum[start + i]! / total;
    return out;
  }
}
