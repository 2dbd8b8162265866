import type { ParameterSet } from '../params.js';
import type { ResolvedAdamWConfig } from './config.js';
import { G_ADDR, W_ADDR } from './moment-memory.js';
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
    const { firstBlock, mAddr, bytes, vOffset } = mem;
    const wBlocks = mem.blocksOf(w);
    const gBlocks = mem.blocksOf(g);
    for (let k = 0; k < this.specs.length; k++) {
      const keep = 1 - lr * this.decay[k]!;
      for (let j = firstBlock[k]!; j < firstBlock[k + 1]!; j++) {
        mem.stage('w', wBlocks, j);
        mem.stage('g', gBlocks, j);
        adamw(mAddr[j]!, mAddr[j]! + vOffset, G_ADDR, W_ADDR, bytes[j]!, beta1, 1 - beta1, beta2, 1 - beta2, eps, keep, stepSize, invRootCorrection2);
        mem.unstageW(wBlocks, j);
      }
    }
  }
}
