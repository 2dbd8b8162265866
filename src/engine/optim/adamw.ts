import type { ParameterSet } from '../params.js';
import type { ResolvedAdamWConfig } from './config.js';
import { MomentOptimizer } from './optimizer.js';

/**
 * AdamW as `torch.optim.AdamW` (decoupled weight decay, Loshchilov & Hutter 2019), one fused SIMD
 * pass over cache-sized blocks:
 *   w ← w(1 − lr·λ)
 *   m ← β₁m + (1−β₁)g;  v ← β₂v + (1−β₂)g²
 *   w ← w − (lr/(1−β₁ᵗ)) · m / (√v/√(1−β₂ᵗ) + ε)
 */
export class AdamW extends MomentOptimizer {
  declare readonly config: ResolvedAdamWConfig;

  constructor(config: ResolvedAdamWConfig, layout: ParameterSet) {
    super(config, layout);
  }

  protected update(w: Float32Array, g: Float32Array, lr: number, t: number): void {
    const { betas, eps } = this.config;
    const [beta1, beta2] = betas;
    const stepSize = lr / (1 - beta1 ** t);
    const invRootCorrection2 = 1 / Math.sqrt(1 - beta2 ** t);
    const mem = this.moments;
    const { adamw } = mem.kernels;
    const { mAddr, vOffset, w: wScratch, g: gScratch } = mem;
    const { first, bytes } = mem.blocks;
    const wBlocks = mem.blocks.of(w);
    const gBlocks = mem.blocks.of(g);
    for (let k = 0; k < this.specs.length; k++) {
      const keep = 1 - lr * this.decay[k]!;
      for (let j = first[k]!; j < first[k + 1]!; j++) {
        wScratch.load(wBlocks[j]!);
        gScratch.load(gBlocks[j]!);
        adamw(mAddr[j]!, mAddr[j]! + vOffset, gScratch.addr, wScratch.addr, bytes[j]!, beta1, 1 - beta1, beta2, 1 - beta2, eps, keep, stepSize, invRootCorrection2);
        wScratch.store(wBlocks[j]!);
      }
    }
  }
}
