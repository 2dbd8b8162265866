import { chunkCount, chunkRange } from './load-balancing.js';

/**
 * A sender broke the rules for its part; the caller excludes that peer from the round and logs why.
 * `poisoned`: it sent values that would poison the average (NaN/Inf, absurd magnitude), an offence
 * that counts towards a ban; other faults (stalls, framing) may be the network's.
 */
export class PeerFault extends Error {
  override readonly name = 'PeerFault';
  constructor(
    readonly peerId: string,
    message: string,
    readonly poisoned = false,
  ) {
    super(`peer ${peerId}: ${message}`);
  }
}

/**
 * How a reducer combines its senders' chunks: `mean` (hivemind's weighted mean), `centered-clip`
 * (BTARD's CenteredClip: a sender far from the others pulls the result by at most τ) or
 * `trimmed-mean` (per coordinate, the ⌈n/4⌉ largest and smallest values are dropped).
 */
export const AGGREGATIONS = ['mean', 'centered-clip', 'trimmed-mean'] as const;
export type Aggregation = (typeof AGGREGATIONS)[number];

export interface ReducerLimits {
  /** Values with a larger magnitude are treated as an attack or a bug, not averaged. */
  readonly maxAbs: number;
  /** @default 'mean' */
  readonly aggregation?: Aggregation;
}

const DEFAULT_LIMITS: ReducerLimits = { maxAbs: 1e8 };

/** CenteredClip iterations at most (BTARD's ALBERT runs use 20), and the relative step below which it stops. */
const CLIP_ITERATIONS = 20;
const CLIP_STOP = 1e-6;
/**
 * τ = CLIP_RADIUS × the median distance from the coordinate-wise median: honest inputs, whose
 * distances are alike, then go unclipped, so an honest round gives the weighted mean itself.
 */
const CLIP_RADIUS = 3;
/**
 * Below this many values distances are too noisy to set τ alone (a part's short last chunk): τ is
 * then at least the part's earlier spread per value, scaled to the chunk.
 */
const MIN_CLIP_VALUES = 64;

/**
 * CenteredClip's fast path: when no input lies further than this × the median input's distance from
 * the weighted mean, the mean is returned at once. No input is then clipped at any τ at least that
 * far, so the mean is CenteredClip's own fixed point; and one far input drags the mean towards it,
 * which puts it (k − 1) times further from the mean than the others: ≥ 2 for 3 or more inputs.
 */
const MEAN_FAST_PATH = 1.5;

/** One sender's chunk and its normalised weight. */
interface Input {
  readonly w: number;
  readonly x: Float32Array;
}

/**
 * BTARD's CenteredClip (Karimireddy et al. 2021, Gorbunov et al. 2021): from the coordinate-wise
 * median v, repeat v ← v + Σ w_i·min(1, τ/‖x_i − v‖)·(x_i − v) / Σ w_i over the inputs within τ of
 * that median (the others are left out). τ = CLIP_RADIUS × the median distance of the inputs from
 * the median (at least `floor`), so it scales with the honest spread instead of being a constant
 * tuned to one model: a far outlier has no effect, one inside τ moves the result by about its weight
 * share × τ at most. Weights > 0 (weightless senders are left out by the caller, so they cannot move
 * the median or τ). Returns the average and that median distance.
 */
export function centeredClip(inputs: readonly Input[], floor = 0): { average: Float32Array; spread: number } {
  const n = inputs[0]!.x.length;
  // an honest round costs two passes over the inputs instead of a median and several passes (MEAN_FAST_PATH)
  const weightSum = inputs.reduce((a, p) => a + p.w, 0);
  const mean = weightedMean(inputs, weightSum);
  const fromMean = inputs.map((p) => distanceBetween(p.x, mean));
  const typical = medianOf(fromMean);
  if (Math.max(...fromMean) <= MEAN_FAST_PATH * Math.max(typical, floor)) return { average: new Float32Array(mean), spread: typical };
  let v = coordinateMedian(inputs);
  const distance = (x: Float32Array): number => distanceBetween(x, v);
  const distances = inputs.map((p) => distance(p.x));
  const spread = medianOf(distances);
  const tau = CLIP_RADIUS * Math.max(spread, floor);
  if (tau === 0) return { average: new Float32Array(v), spread }; // at least half the inputs sit on the median
  // an input beyond τ from the median is left out, not clipped: clipped, it would still pull by τ,
  // which is several times the honest spread of noisy gradients (the reference's "reject parts far
  // from the median", docs/protocol.md)
  const kept = inputs.filter((_, i) => distances[i]! <= tau);
  const total = kept.reduce((a, p) => a + p.w, 0);
  // the weighted mean of the kept inputs is the fixed point when none lies beyond τ from it (an
  // honest round): checked in one pass instead of iterating towards it
  const median = v;
  v = weightedMean(kept, total);
  if (kept.every((p) => distance(p.x) <= tau)) return { average: new Float32Array(v), spread };
  v = median;
  const step = new Float64Array(n);
  for (let it = 0; it < CLIP_ITERATIONS; it++) {
    step.fill(0);
    for (const p of kept) {
      const d = distance(p.x);
      const c = (p.w / total) * (d > tau ? tau / d : 1);
      for (let j = 0; j < n; j++) step[j]! += c * (p.x[j]! - v[j]!);
    }
    let moved = 0;
    for (let j = 0; j < n; j++) {
      v[j]! += step[j]!;
      moved += step[j]! ** 2;
    }
    if (Math.sqrt(moved) <= CLIP_STOP * tau) break;
  }
  return { average: new Float32Array(v), spread };
}

/** Per coordinate: drops the ⌈n/4⌉ largest and smallest values (none below 3 inputs) and takes the weighted mean of the rest; weights > 0. */
export function trimmedMean(inputs: readonly Input[]): Float32Array {
  const n = inputs[0]!.x.length;
  const k = inputs.length < 3 ? 0 : Math.min(Math.ceil(inputs.length / 4), Math.floor((inputs.length - 1) / 2));
  const out = new Float32Array(n);
  const order = inputs.map((_, i) => i);
  for (let j = 0; j < n; j++) {
    order.sort((a, b) => inputs[a]!.x[j]! - inputs[b]!.x[j]!);
    let sum = 0;
    let weight = 0;
    for (let r = k; r < inputs.length - k; r++) {
      const p = inputs[order[r]!]!;
      sum += p.w * p.x[j]!;
      weight += p.w;
    }
    out[j] = sum / weight;
  }
  return out;
}

/**
 * Σ w_i·x_i / weightSum, in float64. The loops read each array through a local and a hoisted length:
 * an all-reduce runs them over every value of the part (V8 then keeps the bounds checks out of them).
 */
function weightedMean(inputs: readonly Input[], weightSum: number): Float64Array {
  const n = inputs[0]!.x.length;
  const mean = new Float64Array(n);
  for (const p of inputs) {
    const c = p.w / weightSum;
    const x = p.x;
    for (let j = 0; j < n; j++) mean[j]! += c * x[j]!;
  }
  return mean;
}

function distanceBetween(x: Float32Array, c: Float64Array): number {
  let d = 0;
  const n = x.length;
  for (let j = 0; j < n; j++) {
    const e = x[j]! - c[j]!;
    d += e * e;
  }
  return Math.sqrt(d);
}

/**
 * The index of the first value that is NaN, ±Infinity or beyond ±maxAbs, or −1: one comparison pair
 * per value (NaN fails both), as every received value of an all-reduce is checked.
 */
export function firstBeyond(values: Float32Array, maxAbs: number): number {
  // a bound of Infinity still refuses ±Infinity
  const bound = Math.min(maxAbs, Number.MAX_VALUE);
  const n = values.length;
  for (let i = 0; i < n; i++) {
    const v = values[i]!;
    if (!(v <= bound && v >= -bound)) return i;
  }
  return -1;
}

function coordinateMedian(inputs: readonly Input[]): Float64Array {
  const n = inputs[0]!.x.length;
  const out = new Float64Array(n);
  const k = inputs.length;
  const xs = inputs.map((p) => p.x);
  const column = new Float64Array(k);
  const mid = k >> 1;
  for (let j = 0; j < n; j++) {
    // insertion sort: a typed array's sort() costs ~1 µs per call, more than the sort itself for a few senders
    for (let i = 0; i < k; i++) {
      const v = xs[i]![j]!;
      let m = i - 1;
      for (; m >= 0 && column[m]! > v; m--) column[m + 1] = column[m]!;
      column[m + 1] = v;
    }
    out[j] = k % 2 === 1 ? column[mid]! : (column[mid - 1]! + column[mid]!) / 2;
  }
  return out;
}

function medianOf(values: ArrayLike<number>): number {
  const s = Float64Array.from(values).sort();
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * Averages one part of the flattened tensor as its senders stream it in chunks, weighting each
 * sender by the samples it contributed. Each chunk is averaged over the senders that delivered it,
 * so a sender that vanishes mid-round leaves the chunks it sent in and the rest without it; bad
 * data (wrong length, out of order, NaN/Inf, absurd magnitude) never enters the sum. A robust
 * aggregation keeps every sender's chunk until that chunk is averaged (n× the part's memory, as in
 * BTARD), then lets it go.
 */
export class PartReducer {
  private readonly sum: Float32Array;
  /** Per chunk, each weighted sender's values (robust aggregations only). */
  private readonly held: Array<Map<string, Float32Array>> | undefined;
  /** CenteredClip's spread per √value in this part's last chunk of MIN_CLIP_VALUES or more. */
  private spreadPerValue = 0;
  /** Held chunks' buffers whose average was taken, for the next chunks to be held (robust aggregations only). */
  private readonly spare: Float32Array[] = [];
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
    this.chunks = chunkCount(size, chunkValues);
    const robust = (limits.aggregation ?? 'mean') !== 'mean';
    this.sum = new Float32Array(robust ? 0 : size);
    this.held = robust ? Array.from({ length: this.chunks }, () => new Map()) : undefined;
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
    const bad = firstBeyond(values, this.limits.maxAbs);
    if (bad >= 0) {
      const v = values[bad]!;
      if (!Number.isFinite(v)) throw new PeerFault(peer, `chunk ${chunkIndex} holds a non-finite value (${v}) at ${start + bad}`, true);
      throw new PeerFault(peer, `chunk ${chunkIndex} holds ${v} at ${start + bad}, beyond the ±${this.limits.maxAbs} limit`, true);
    }
    const w = this.weights.get(peer)!;
    if (w > 0 && this.held !== undefined) {
      // a held chunk lives until its average is taken: a buffer averaged chunks gave back, not a new one each time
      const copy = this.spare.pop()?.subarray(0, values.length) ?? new Float32Array(values.length);
      copy.set(values);
      this.held[chunkIndex]!.set(peer, copy);
    } else if (w > 0) {
      const target = this.sum.subarray(start, end);
      const n = values.length;
      for (let i = 0; i < n; i++) target[i]! += w * values[i]!;
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
    if (this.held !== undefined) {
      const inputs = [...this.held[index]!].map(([peer, x]) => ({ w: this.weights.get(peer)!, x }));
      if (inputs.length === 0) throw new Error(`chunk ${index} was already averaged`);
      this.held[index]!.clear();
      try {
        if (this.limits.aggregation === 'trimmed-mean') return trimmedMean(inputs);
        const n = inputs[0]!.x.length;
        const { average, spread } = centeredClip(inputs, n < MIN_CLIP_VALUES ? this.spreadPerValue * Math.sqrt(n) : 0);
        if (n >= MIN_CLIP_VALUES) this.spreadPerValue = spread / Math.sqrt(n);
        return average;
      } finally {
        // full-size buffers only (a part's short last chunk's are views of one), at most one per sender
        for (const { x } of inputs) if (x.buffer.byteLength === this.chunkValues * 4 && this.spare.length < this.weights.size) this.spare.push(new Float32Array(x.buffer));
      }
    }
    const [start, end] = chunkRange(this.size, this.chunkValues, index);
    const out = new Float32Array(end - start);
    for (let i = 0; i < out.length; i++) out[i] = this.sum[start + i]! / total;
    return out;
  }
}
