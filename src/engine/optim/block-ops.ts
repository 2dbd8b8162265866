/**
 * Whole-buffer float32 operations for clipping and accumulation (Σx², x ← f·x, y ← y + a·x,
 * out ← f·x) on the SIMD kernels, staged block by block through a small kernel memory of their
 * own: several times faster than the same loops in JavaScript, which V8 does not vectorize.
 */
import { instantiateKernels, type Kernels } from './kernels.js';
import { BLOCK, Blocks, Scratch } from './staging.js';

const X_ADDR = 64;
const Y_ADDR = X_ADDR + BLOCK * 4;
const PAGES = Math.ceil((Y_ADDR + BLOCK * 4) / 65536);

class BlockOps {
  private readonly kernels: Kernels;
  /** The two f64x2 lane sums written by sum_squares. */
  private readonly sums: Float64Array;
  private readonly x: Scratch;
  private readonly y: Scratch;
  /** Block plans by buffer length (a model's buffers all share one). */
  private readonly plans = new Map<number, Blocks>();

  constructor() {
    const { memory, kernels } = instantiateKernels(PAGES);
    this.kernels = kernels;
    this.sums = new Float64Array(memory.buffer, 0, 4);
    const heap = new Float32Array(memory.buffer);
    this.x = new Scratch(heap, X_ADDR);
    this.y = new Scratch(heap, Y_ADDR);
  }

  private plan(length: number): Blocks {
    let plan = this.plans.get(length);
    if (!plan) {
      plan = new Blocks([{ offset: 0, size: length }]);
      this.plans.set(length, plan);
    }
    return plan;
  }

  /** Σx² over the whole buffer, accumulated in float64. */
  sumSquares(data: Float32Array): number {
    const plan = this.plan(data.length);
    const blocks = plan.of(data);
    let total = 0;
    for (let j = 0; j < blocks.length; j++) {
      this.x.load(blocks[j]!);
      this.kernels.sum_squares(X_ADDR, plan.bytes[j]!);
      total += this.sums[0]! + this.sums[1]! + this.sums[2]! + this.sums[3]!;
    }
    return total;
  }

  /** out ← factor·x (`out` may be `x`). */
  scaleInto(out: Float32Array, x: Float32Array, factor: number): void {
    if (out.length !== x.length) throw new RangeError(`scaleInto: lengths differ (${out.length} vs ${x.length})`);
    const plan = this.plan(x.length);
    const from = plan.of(x);
    const to = plan.of(out);
    for (let j = 0; j < from.length; j++) {
      this.x.load(from[j]!);
      this.kernels.scale(X_ADDR, plan.bytes[j]!, factor);
      this.x.store(to[j]!);
    }
  }

  /** y ← y + a·x. */
  axpy(y: Float32Array, x: Float32Array, a: number): void {
    if (y.length !== x.length) throw new RangeError(`axpy: lengths differ (${y.length} vs ${x.length})`);
    const plan = this.plan(x.length);
    const xs = plan.of(x);
    const ys = plan.of(y);
    for (let j = 0; j < xs.length; j++) {
      this.x.load(xs[j]!);
      this.y.load(ys[j]!);
      this.kernels.axpy(Y_ADDR, X_ADDR, plan.bytes[j]!, a);
      this.y.store(ys[j]!);
    }
  }
}

let shared: BlockOps | undefined;

/** The process's block operations (one small kernel memory, made on first use). */
export function blockOps(): BlockOps {
  return (shared ??= new BlockOps());
}
