/**
 * Moving float32 data between ordinary ArrayBuffers (parameters, gradients), which WebAssembly
 * cannot address, and scratch blocks in a kernel memory, one cache-sized block at a time. Views of
 * the blocks are made once per buffer, so staging allocates nothing per step.
 */

/** Elements per block: two scratch blocks (128 KiB together) stay in the L2 cache; longer blocks stream better than L1-sized ones. */
export const BLOCK = 16384;

/** Ranges of a flat buffer (e.g. its tensors) cut into blocks of at most BLOCK elements. */
export class Blocks {
  /** Per block: start in the buffer and length, in elements. */
  readonly start: Int32Array;
  readonly length: Int32Array;
  /** Per block: bytes of whole 4-lane vectors covering it (the kernels' `bytes` argument). */
  readonly bytes: Int32Array;
  /** Per block: offset of its start within its range, in elements. */
  readonly within: Int32Array;
  /** Index of each range's first block, plus the total block count at the end. */
  readonly first: Int32Array;
  private readonly views = new WeakMap<Float32Array, Float32Array[]>();

  constructor(ranges: readonly { readonly offset: number; readonly size: number }[]) {
    this.first = new Int32Array(ranges.length + 1);
    let count = 0;
    ranges.forEach((r, k) => {
      this.first[k] = count;
      count += Math.ceil(r.size / BLOCK);
    });
    this.first[ranges.length] = count;
    this.start = new Int32Array(count);
    this.length = new Int32Array(count);
    this.bytes = new Int32Array(count);
    this.within = new Int32Array(count);
    ranges.forEach((r, k) => {
      for (let b = 0, j = this.first[k]!; b < r.size; b += BLOCK, j++) {
        this.start[j] = r.offset + b;
        this.length[j] = Math.min(BLOCK, r.size - b);
        this.bytes[j] = Math.ceil(this.length[j]! / 4) * 16;
        this.within[j] = b;
      }
    });
  }

  /** `data` cut into the blocks (views, cached per buffer). */
  of(data: Float32Array): Float32Array[] {
    let blocks = this.views.get(data);
    if (!blocks) {
      blocks = Array.from(this.start, (s, j) => data.subarray(s, s + this.length[j]!));
      this.views.set(data, blocks);
    }
    return blocks;
  }
}

/** One BLOCK-element scratch area at byte address `addr` of a kernel memory. */
export class Scratch {
  private readonly area: Float32Array;
  private readonly prefixes = new Map<number, Float32Array>();

  constructor(
    heap: Float32Array,
    readonly addr: number,
  ) {
    this.area = heap.subarray(addr / 4, addr / 4 + BLOCK);
  }

  /** Copies `block` in, zeroing the lanes up to the next multiple of 4 so whole vectors see zeros. */
  load(block: Float32Array): void {
    this.area.set(block);
    const n = block.length;
    if (n % 4 !== 0) this.area.fill(0, n, n + 4 - (n % 4));
  }

  /** Copies the first `block.length` elements out into `block`. */
  store(block: Float32Array): void {
    const n = block.length;
    let prefix = this.prefixes.get(n);
    if (!prefix) {
      prefix = this.area.subarray(0, n);
      this.prefixes.set(n, prefix);
    }
    block.set(prefix);
  }
}
