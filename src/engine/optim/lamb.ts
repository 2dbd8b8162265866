import type { ParameterSet } from '../params.js';
import type { ResolvedLambConfig } from './config.js';
import { MomentOptimizer } from './optimizer.js';

/**
 * LAMB (You et al. 2019) exactly as `torch_optimizer.Lamb`, the implementation hivemind's ALBERT
 * trainer uses. Per tensor, with t the step count:
 *   m ← β₁m + (1−β₁)g;  v ← β₂v + (1−β₂)g²
 *   u = m / (√v + ε) + λw                      (λ = 0 for tensors exempt from decay)
 *   r = min(‖w‖, clamp) / ‖u‖, or 1 if either norm is 0
 *   w ← w − lr·c·r·u,  c = √(1−β₂ᵗ)/(1−β₁ᵗ) with bias correction, else 1
 * Two passes per tensor, because r needs the whole tensor's norms before any weight moves: the
 * first updates the moments, stores u and sums ‖w‖² and ‖u‖²; the second moves the weights by the
 * stored u (reading u back is cheaper than recomputing its square root and division). Both run as
 * SIMD kernels over cache-sized blocks (staging.ts); the norms are summed in float64 across blocks.
 */
export class Lamb extends MomentOptimizer {
  declare readonly config: ResolvedLambConfig;

  constructor(config: ResolvedLambConfig, layout: ParameterSet) {
    super(config, layout);
  }

  protected update(w: Float32Array, g: Float32Array, lr: number, t: number): void {
    const { betas, eps, clampValue, biasCorrection } = this.config;
    const [beta1, beta2] = betas;
    const stepSize = lr * (biasCorrection ? Math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t) : 1);
    const mem = this.moments;
    const { lamb_moments, lamb_apply } = mem.kernels;
    const { mAddr, uAddr, vOffset, sums, w: wScratch, g: gScratch } = mem;
    const { first, bytes } = mem.blocks;
    const wBlocks = mem.blocks.of(w);
    const gBlocks = mem.blocks.of(g);
    for (let k = 0; k < this.specs.length; k++) {
      const decay = this.decay[k]!;
      let weightSq = 0;
      let updateSq = 0;
      for (let j = first[k]!; j < first[k + 1]!; j++) {
        wScratch.load(wBlocks[j]!);
        gScratch.load(gBlocks[j]!);
        lamb_moments(mAddr[j]!, mAddr[j]! + vOffset, gScratch.addr, wScratch.addr, uAddr[j]!, bytes[j]!, beta1, 1 - beta1, beta2, 1 - beta2, eps, decay);
        weightSq += sums[0]! + sums[1]! + sums[2]! + sums[3]!;
        updateSq += sums[4]! + sums[5]! + sums[6]! + sums[7]!;
      }
      const weightNorm = Math.min(Math.sqrt(weightSq), clampValue);
      const updateNorm = Math.sqrt(updateSq);
      const scale = stepSize * (weightNorm === 0 || updateNorm === 0 ? 1 : weightNorm / updateNorm);
      for (let j = first[k]!; j < first[k + 1]!; j++) {
        wScratch.load(wBlocks[j]!);
        lamb_apply(uAddr[j]!, wScratch.addr, bytes[j]!, scale);
        wScratch.store(wBlocks[j]!);
      }
    }
  }
}
