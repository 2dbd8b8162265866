/**
 * Where the SIMD kernels work: one WebAssembly memory holding the optimizer's moments m and v
 * (each tensor padded to a multiple of 4 elements so every vector stays inside its tensor, padding
 * kept at zero), two scratch blocks, and room for one tensor's LAMB update u between its passes. Parameters and gradients live in ordinary ArrayBuffers
 * that WebAssembly cannot address, so they are staged through the scratch blocks one cache-sized
 * block at a time: the copy stays in cache while m and v are read and written where they live.
 */
import type { ParameterSet, ParamView } from '../params.js';
import { instantiateKernels, type Kernels } from './kernels.js';

/** Elements per block: the two scratch blocks (128 KiB together) stay in the L2 cache; longer blocks stream better than L1-sized ones. */
export const BLOCK = 16384;
const PAGE = 65536;
const MAX_PAGES = 65536; // WebAssembly's 4 GiB limit for a 32-bit memory
/** Byte addresses: lane sums written by lamb_moments, the scratch blocks, u, then m and v. */
export const SUMS_ADDR = 0;
export const W_ADDR = 64;
export const G_ADDR = W_ADDR + BLOCK * 4;
export const U_ADDR = G_ADDR + BLOCK * 4;

export class MomentMemory {
  readonly kernels: Kernels;
  /** Lane sums written by lamb_moments: [Σw² ×4, Σu² ×4]. */
  readonly sums: Float32Array;
  /** Index of each tensor's first block, plus the total block count at the end. */
  readonly firstBlock: Int32Array;
  /** Per block: start in the flat parameter data, length, and its vectors' byte length (padded). */
  private readonly start: Int32Array;
  private readonly length: Int32Array;
  readonly bytes: Int32Array;
  /** Per block: byte address of its m (v is `vOffset` bytes further). */
  readonly mAddr: Int32Array;
  /** Per block: byte address of its part of u (its tensor's u starts at U_ADDR). */
  readonly uAddr: Int32Array;
  readonly vOffset: number;
  private readonly scratch: { readonly w: Float32Array; readonly g: Float32Array };
  /** Per block: the scratch prefix matching the block's length (written back to the parameters). */
  private readonly scratchW: Float32Array[];
  private readonly heap: Float32Array;
  /** Per tensor: element offset of its padded m (and v) region from `momentsBase`. */
  private readonly padded: Int32Array;
  /** Element index of m's first element in `heap` (v follows all of m). */
  private readonly momentsBase: number;
  /** Per parameter buffer: its blocks as views, made once per buffer rather than per step. */
  private readonly views = new WeakMap<Float32Array, Float32Array[]>();

  constructor(private readonly specs: readonly ParamView[]) {
    this.padded = new Int32Array(specs.length);
    this.firstBlock = new Int32Array(specs.length + 1);
    let paddedTotal = 0;
    let paddedLargest = 0;
    let blocks = 0;
    specs.forEach((s, k) => {
      this.padded[k] = paddedTotal;
      paddedTotal += Math.ceil(s.size / 4) * 4;
      paddedLargest = Math.max(paddedLargest, Math.ceil(s.size / 4) * 4);
      this.firstBlock[k] = blocks;
      blocks += Math.ceil(s.size / BLOCK);
    });
    this.firstBlock[specs.length] = blocks;
    const momentsAddr = U_ADDR + paddedLargest * 4;
    this.momentsBase = momentsAddr / 4;
    const totalBytes = momentsAddr + 2 * paddedTotal * 4;
    const pages = Math.ceil(totalBytes / PAGE);
    if (pages > MAX_PAGES) throw new RangeError(`optimizer moments for ${paddedTotal} parameters need ${totalBytes} bytes, over WebAssembly's 4 GiB memory limit`);
    const { memory, kernels } = instantiateKernels(pages);
    this.kernels = kernels;
    this.heap = new Float32Array(memory.buffer);
    this.sums = this.heap.subarray(SUMS_ADDR / 4, SUMS_ADDR / 4 + 8);
    this.scratch = { w: this.heap.subarray(W_ADDR / 4, W_ADDR / 4 + BLOCK), g: this.heap.subarray(G_ADDR / 4, G_ADDR / 4 + BLOCK) };
    this.vOffset = paddedTotal * 4;
    this.start = new Int32Array(blocks);
    this.length = new Int32Array(blocks);
    this.bytes = new Int32Array(blocks);
    this.mAddr = new Int32Array(blocks);
    this.uAddr = new Int32Array(blocks);
    this.scratchW = [];
    specs.forEach((s, k) => {
      for (let b = 0, j = this.firstBlock[k]!; b < s.size; b += BLOCK, j++) {
        const length = Math.min(BLOCK, s.size - b);
        this.start[j] = s.offset + b;
        this.length[j] = length;
        this.bytes[j] = Math.ceil(length / 4) * 16;
        this.mAddr[j] = momentsAddr + (this.padded[k]! + b) * 4;
        this.uAddr[j] = U_ADDR + b * 4;
        this.scratchW.push(this.scratch.w.subarray(0, length));
      }
    });
  }

  /** `data` (a parameter or gradient buffer) cut into the blocks. */
  blocksOf(data: Float32Array): Float32Array[] {
    let blocks = this.views.get(data);
    if (!blocks) {
      blocks = Array.from(this.start, (s, j) => data.subarray(s, s + this.length[j]!));
      this.views.set(data, blocks);
    }
    return blocks;
  }

  /** Copies block j of `blocks` into the w or g scratch block, zeroing the padding lanes. */
  stage(slot: 'w' | 'g', blocks: Float32Array[], j: number): void {
    const target = this.scratch[slot];
    target.set(blocks[j]!);
    const length = this.length[j]!;
    if (length % 4 !== 0) target.fill(0, length, this.bytes[j]! / 4);
  }

  /** Copies the w scratch block back into block j of `blocks`. */
  unstageW(blocks: Float32Array[], j: number): void {
    blocks[j]!.set(this.scratchW[j]!);
  }

  /** Copies m (`which` = 'm') or v out into a set with the parameters' layout. */
  copyOut(which: 'm' | 'v', into: ParameterSet): void {
    const base = this.momentsBase + (which === 'm' ? 0 : this.vOffset / 4);
    this.specs.forEach((s, k) => into.data.set(this.heap.subarray(base + this.padded[k]!, base + this.padded[k]! + s.size), s.offset));
  }

  /** Replaces m or v with the values of a set with the parameters' layout (padding stays zero). */
  copyIn(which: 'm' | 'v', from: ParameterSet): void {
    const base = this.momentsBase + (which === 'm' ? 0 : this.vOffset / 4);
    this.specs.forEach((s, k) => this.heap.set(from.data.subarray(s.offset, s.offset + s.size), base + this.padded[k]!));
  }
}
