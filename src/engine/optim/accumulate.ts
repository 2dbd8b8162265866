import type { ParameterSet } from '../params.js';
import { blockOps } from './block-ops.js';
import { LayoutGuard } from './layout.js';

/**
 * Sums the gradients of micro-batches, each weighted by its sample count, so that the average is
 * the gradient of the mean loss over every sample seen (micro-batches may differ in size). One
 * buffer, preallocated; adding allocates nothing.
 */
export class GradientAccumulator {
  /** Σ samplesᵢ·gradᵢ over the micro-batches added since the last reset (stale while `samples` is 0). */
  readonly sum: ParameterSet;
  private total = 0;
  private batches = 0;
  private averaged: ParameterSet | undefined;
  private readonly guard: LayoutGuard;

  constructor(private readonly layout: ParameterSet) {
    this.sum = layout.zerosLike();
    this.guard = new LayoutGuard(layout);
  }

  /** Samples accumulated since the last reset. */
  get samples(): number {
    return this.total;
  }

  /** Micro-batches accumulated since the last reset. */
  get microBatches(): number {
    return this.batches;
  }

  /** Adds one micro-batch's gradient (the gradient of its mean loss) computed over `samples` samples. */
  add(grads: ParameterSet, samples: number): void {
    if (!Number.isSafeInteger(samples) || samples <= 0) throw new RangeError(`micro-batch sample count must be an integer > 0; got ${samples}`);
    this.guard.check(grads, 'micro-batch gradient');
    // the first batch overwrites, so reset() need not clear the buffer
    if (this.batches === 0) blockOps().scaleInto(this.sum.data, grads.data, samples);
    else blockOps().axpy(this.sum.data, grads.data, samples);
    this.total += samples;
    this.batches += 1;
  }

  /**
   * The sample-weighted mean gradient, sum / samples, written into `out` (default: a buffer of the
   * accumulator's own, allocated on first use and reused).
   */
  average(out?: ParameterSet): ParameterSet {
    if (this.total === 0) throw new Error('no gradients accumulated: add a micro-batch before averaging');
    const target = out ?? (this.averaged ??= this.layout.zerosLike());
    this.guard.check(target, 'average output');
    blockOps().scaleInto(target.data, this.sum.data, 1 / this.total);
    return target;
  }

  /** Starts a new accumulation (O(1): the next add overwrites the sum). */
  reset(): void {
    this.total = 0;
    this.batches = 0;
  }
}
