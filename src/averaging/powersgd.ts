/**
 * PowerSGD gradient compression (Vogels et al. 2019; hivemind's PowerSGDGradientAverager): a gradient
 * matrix M (m×n, with this peer's error feedback added) is averaged as two thin matrices instead of
 * m·n values. Phase P all-reduces P = M·Q (m×r); each peer orthonormalises the average P̂, phase Q
 * all-reduces Q = Mᵀ·P̂ (n×r) together with the tensors left uncompressed, and the gradient becomes
 * P̂·Q̄ᵀ. What the approximation missed stays in the error buffer and joins the next epoch's gradient.
 * This module is the arithmetic of one peer's round; the averager runs the two all-reduces.
 */
import { createHash } from 'node:crypto';
import { Rng } from '../engine/rng.js';

/** A tensor of the flat gradient vector. */
export interface GradientTensor {
  readonly offset: number;
  readonly shape: readonly number[];
}

interface Compressed {
  readonly offset: number;
  readonly rows: number;
  readonly cols: number;
  /** Where its P (rows×rank) sits in the phase-P vector and its Q (cols×rank) in the phase-Q vector. */
  readonly p: number;
  readonly q: number;
  /** Where its error buffer sits. */
  readonly m: number;
}

interface Plain {
  readonly offset: number;
  readonly length: number;
  /** Where it sits in the phase-Q vector, after every Q. */
  readonly q: number;
}

export interface PowerSgdLayout {
  readonly rank: number;
  readonly compressed: readonly Compressed[];
  readonly plain: readonly Plain[];
  readonly pLength: number;
  readonly qLength: number;
  readonly errorLength: number;
  /** Values of the gradient vector, for the compression ratio. */
  readonly gradientLength: number;
}

/**
 * Which tensors are compressed: a tensor of 2 or more dimensions, viewed as shape[0] × the rest, when
 * factorising saves at least `minCompressionRatio` of its values (hivemind's rule: 1 − r·(m+n)/(m·n) ≥
 * ratio); vectors and small matrices are averaged as they are.
 */
export function powerSgdLayout(tensors: readonly GradientTensor[], rank: number, minCompressionRatio: number): PowerSgdLayout {
  if (!Number.isInteger(rank) || rank < 1) throw new RangeError(`PowerSGD rank ${rank} must be an integer ≥ 1`);
  if (!(minCompressionRatio >= 0 && minCompressionRatio < 1)) throw new RangeError(`PowerSGD min compression ratio ${minCompressionRatio} must be in [0, 1)`);
  const compressed: Compressed[] = [];
  const plainTensors: GradientTensor[] = [];
  let p = 0;
  let q = 0;
  let m = 0;
  let gradientLength = 0;
  for (const t of tensors) {
    const size = t.shape.reduce((a, b) => a * b, 1);
    gradientLength += size;
    const rows = t.shape[0] ?? 1;
    const cols = size / rows;
    if (t.shape.length < 2 || 1 - (rank * (rows + cols)) / size < minCompressionRatio) {
      plainTensors.push(t);
      continue;
    }
    compressed.push({ offset: t.offset, rows, cols, p, q, m });
    p += rows * rank;
    q += cols * rank;
    m += size;
  }
  const plain: Plain[] = [];
  for (const t of plainTensors) {
    const length = t.shape.reduce((a, b) => a * b, 1);
    plain.push({ offset: t.offset, length, q });
    q += length;
  }
  return { rank, compressed, plain, pLength: p, qLength: q, errorLength: m, gradientLength };
}

/** Values sent per round ÷ values of the gradient: what PowerSGD saves on the wire. */
export function powerSgdWireFraction(layout: PowerSgdLayout): number {
  return (layout.pLength + layout.qLength) / layout.gradientLength;
}

/**
 * The matchmaking schema hash of a PowerSGD round: the gradient's, with the averager's version and
 * its phase sizes, so peers averaging plain gradients, or PowerSGD of another rank or rule, never meet.
 */
export function powerSgdSchema(schema: string, layout: PowerSgdLayout): string {
  return createHash('sha256').update(`${schema}\npowersgd/2 rank ${layout.rank} P ${layout.pLength} Q ${layout.qLength}`).digest('hex');
}

/** One peer's PowerSGD state across rounds: the Q matrices and the error-feedback buffers. */
export class PowerSgd {
  /** Every compressed tensor's Q, cols×rank row-major, one after another (the layout's q offsets). */
  readonly qs: Float32Array;
  /** Error feedback: what earlier rounds' approximations missed, per compressed tensor. */
  readonly errors: Float32Array;
  private p: Float32Array | undefined;

  /**
   * Q starts from the run's seed, so every peer of a run projects onto the same subspace from the
   * first round (hivemind draws it per peer and relies on the first Q average to align them).
   */
  constructor(
    readonly layout: PowerSgdLayout,
    seed: number,
  ) {
    this.qs = new Float32Array(layout.qLength - layout.plain.reduce((n, t) => n + t.length, 0));
    new Rng(seed).normal(this.qs);
    this.errors = new Float32Array(layout.errorLength);
  }

  /** Phase P: adds `gradient` to the error buffers and returns every M·Q, to be all-reduced. */
  phaseP(gradient: Float32Array): Float32Array {
    const { rank } = this.layout;
    const out = new Float32Array(this.layout.pLength);
    for (const c of this.layout.compressed) {
      const m = this.errors.subarray(c.m, c.m + c.rows * c.cols);
      const g = gradient.subarray(c.offset, c.offset + c.rows * c.cols);
      for (let i = 0; i < m.length; i++) m[i]! += g[i]!;
      matmul(m, c.rows, c.cols, this.qs.subarray(c.q, c.q + c.cols * rank), rank, out.subarray(c.p, c.p + c.rows * rank));
    }
    return out;
  }

  /**
   * Phase Q: orthonormalises the averaged P's columns and returns every Mᵀ·P̂ followed by the
   * uncompressed tensors of `gradient`, to be all-reduced.
   */
  phaseQ(averagedP: Float32Array, gradient: Float32Array): Float32Array {
    if (averagedP.length !== this.layout.pLength) throw new RangeError(`phase P result has ${averagedP.length} values, expected ${this.layout.pLength}`);
    const { rank } = this.layout;
    this.p = Float32Array.from(averagedP);
    const out = new Float32Array(this.layout.qLength);
    for (const c of this.layout.compressed) {
      const p = this.p.subarray(c.p, c.p + c.rows * rank);
      orthonormalizeColumns(p, c.rows, rank);
      matmulTransposed(this.errors.subarray(c.m, c.m + c.rows * c.cols), c.rows, c.cols, p, rank, out.subarray(c.q, c.q + c.cols * rank));
    }
    for (const t of this.layout.plain) out.set(gradient.subarray(t.offset, t.offset + t.length), t.q);
    return out;
  }

  /**
   * Ends the round: `averagedQ` becomes the next round's Q; `gradient` receives P̂·Q̄ᵀ for each compressed
   * tensor (and that is taken out of the error buffer) and the averaged uncompressed tensors.
   */
  finish(averagedQ: Float32Array, gradient: Float32Array): void {
    if (!this.p) throw new Error('PowerSGD: finish() before phaseQ()');
    if (averagedQ.length !== this.layout.qLength) throw new RangeError(`phase Q result has ${averagedQ.length} values, expected ${this.layout.qLength}`);
    const { rank } = this.layout;
    this.qs.set(averagedQ.subarray(0, this.qs.length));
    for (const c of this.layout.compressed) {
      const p = this.p.subarray(c.p, c.p + c.rows * rank);
      const q = this.qs.subarray(c.q, c.q + c.cols * rank);
      const m = this.errors.subarray(c.m, c.m + c.rows * c.cols);
      const g = gradient.subarray(c.offset, c.offset + c.rows * c.cols);
      for (let i = 0; i < c.rows; i++) {
        for (let j = 0; j < c.cols; j++) {
          let s = 0;
          for (let k = 0; k < rank; k++) s += p[i * rank + k]! * q[j * rank + k]!;
          g[i * c.cols + j] = s;
          m[i * c.cols + j]! -= s;
        }
      }
    }
    for (const t of this.layout.plain) gradient.set(averagedQ.subarray(t.q, t.q + t.length), t.offset);
    this.p = undefined;
  }

  /**
   * A round that failed after phaseP: takes `gradient` (the one phaseP added) back out of the error
   * buffers, so the local step the caller takes with it is not applied a second time later. Q stays.
   */
  abandon(gradient: Float32Array): void {
    for (const c of this.layout.compressed) {
      const m = this.errors.subarray(c.m, c.m + c.rows * c.cols);
      const g = gradient.subarray(c.offset, c.offset + c.rows * c.cols);
      for (let i = 0; i < m.length; i++) m[i]! -= g[i]!;
    }
    this.p = undefined;
  }
}

/** out (rows×k) = a (rows×cols) · b (cols×k), row-major. */
function matmul(a: Float32Array, rows: number, cols: number, b: Float32Array, k: number, out: Float32Array): void {
  out.fill(0);
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      const aij = a[i * cols + j]!;
      if (aij === 0) continue;
      for (let c = 0; c < k; c++) out[i * k + c]! += aij * b[j * k + c]!;
    }
  }
}

/** out (cols×k) = aᵀ · p, where a is rows×cols and p rows×k, row-major. */
function matmulTransposed(a: Float32Array, rows: number, cols: number, p: Float32Array, k: number, out: Float32Array): void {
  out.fill(0);
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      const aij = a[i * cols + j]!;
      if (aij === 0) continue;
      for (let c = 0; c < k; c++) out[j * k + c]! += aij * p[i * k + c]!;
    }
  }
}

/**
 * Gram–Schmidt on the columns of a rows×k row-major matrix, in place. The epsilon keeps a vanishing
 * column (a zero gradient) finite, as hivemind's and PyTorch's orthogonalize.
 */
function orthonormalizeColumns(a: Float32Array, rows: number, k: number, eps = 1e-8): void {
  for (let c = 0; c < k; c++) {
    let norm = 0;
    for (let i = 0; i < rows; i++) norm += a[i * k + c]! ** 2;
    const scale = 1 / (Math.sqrt(norm) + eps);
    for (let i = 0; i < rows; i++) a[i * k + c]! *= scale;
    for (let d = c + 1; d < k; d++) {
      let dot = 0;
      for (let i = 0; i < rows; i++) dot += a[i * k + c]! * a[i * k + d]!;
      for (let i = 0; i < rows; i++) a[i * k + d]! -= dot * a[i * k + c]!;
    }
  }
}
