/**
 * Where the optimizers' SIMD kernels work: one WebAssembly memory holding the moments m and v (each
 * tensor padded to a multiple of 4 elements so every vector stays inside its tensor, padding kept
 * at zero), the w and g scratch blocks, and room for one tensor's LAMB update u between its passes.
 * Parameters and gradients are staged through the scratch blocks (staging.ts) while m and v are
 * read and written where they live.
 */
import type { ParameterSet, ParamView } from '../params.js';
import { instantiateKernels, type Kernels } from './kernels.js';
import { BLOCK, Blocks, Scratch } from './staging.js';

const PAGE = 65536;
const MAX_PAGES = 65536; // WebAssembly's 4 GiB limit for a 32-bit memory
/** Byte addresses: lane sums written by the kernels, the scratch blocks, u, then m and v. */
const W_ADDR = 64;
const G_ADDR = W_ADDR + BLOCK * 4;
const U_ADDR = G_ADDR + BLOCK * 4;

export class MomentMemory {
  readonly kernels: Kernels;
  /** Lane sums written by lamb_moments: [Σw² ×4, Σu² ×4]. */
  readonly sums: Float32Array;
  /** The parameters' tensors cut into blocks. */
  readonly blocks: Blocks;
  readonly w: Scratch;
  readonly g: Scratch;
  /** Per block: byte address of its m (v is `vOffset` bytes further) and of its part of u. */
  readonly mAddr: Int32Array;
  readonly uAddr: Int32Array;
  readonly vOffset: number;
  private readonly heap: Float32Array;
  /** Per tensor: element index of its padded m region in `heap` (its v is `vOffset` bytes further). */
  private readonly mStart: Int32Array;

  constructor(private readonly specs: readonly ParamView[]) {
    const padded = specs.map((s) => Math.ceil(s.size / 4) * 4);
    const paddedTotal = padded.reduce((a, b) => a + b, 0);
    const momentsAddr = U_ADDR + Math.max(0, ...padded) * 4;
    const totalBytes = momentsAddr + 2 * paddedTotal * 4;
    const pages = Math.ceil(totalBytes / PAGE);
    if (pages > MAX_PAGES) throw new RangeError(`optimizer moments for ${paddedTotal} parameters need ${totalBytes} bytes, over WebAssembly's 4 GiB memory limit`);
    const { memory, kernels } = instantiateKernels(pages);
    this.kernels = kernels;
    this.heap = new Float32Array(memory.buffer);
    this.sums = this.heap.subarray(0, 8);
    this.w = new Scratch(this.heap, W_ADDR);
    this.g = new Scratch(this.heap, G_ADDR);
    this.vOffset = paddedTotal * 4;
    this.mStart = new Int32Array(specs.length);
    let at = momentsAddr / 4;
    specs.forEach((_s, k) => {
      this.mStart[k] = at;
      at += padded[k]!;
    });
    this.blocks = new Blocks(specs);
    const count = this.blocks.first[specs.length]!;
    this.mAddr = new Int32Array(count);
    this.uAddr = new Int32Array(count);
    specs.forEach((_s, k) => {
      for (let j = this.blocks.first[k]!; j < this.blocks.first[k + 1]!; j++) {
        this.mAddr[j] = (this.mStart[k]! + this.blocks.within[j]!) * 4;
        this.uAddr[j] = U_ADDR + this.blocks.within[j]! * 4;
      }
    });
  }

  /** Copies m (`which` = 'm') or v of the tensors [first, end) out into a set with the parameters' layout. */
  copyOut(which: 'm' | 'v', into: ParameterSet, first = 0, end = this.specs.length): void {
    const shift = which === 'm' ? 0 : this.vOffset / 4;
    for (let k = first; k < end; k++) {
      const s = this.specs[k]!;
      into.data.set(this.heap.subarray(this.mStart[k]! + shift, this.mStart[k]! + shift + s.size), s.offset);
    }
  }

  /** Replaces m or v with the values of a set with the parameters' layout (padding stays zero). */
  copyIn(which: 'm' | 'v', from: ParameterSet): void {
    const shift = which === 'm' ? 0 : this.vOffset / 4;
    this.specs.forEach((s, k) => this.heap.set(from.data.subarray(s.offset, s.offset + s.size), this.mStart[k]! + shift));
  }
}
