import type { ParameterSet } from '../params.js';
import type { ResolvedAdamWConfig } from './config.js';
import { MomentOptimizer } from './optimizer.js';

/**
 * AdamW as `torch.optim.AdamW` (decoupled weight decay, Loshchilov & Hutter 2019), one fused pass:
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
    const [beta1, beta2] = this.config.betas;
    const stepSize = lr / (1 - beta1 ** t);
    const invRootCorrection2 = 1 / Math.sqrt(1 - beta2 ** t);
    const m = this.expAvg.data;
    const v = this.expAvgSq.data;
    for (let k = 0; k < this.specs.length; k++) {
      const { offset, size } = this.specs[k]!;
      adamwPass(w, g, m, v, offset, offset + size, beta1, beta2, this.config.eps, 1 - lr * this.decay[k]!, stepSize, invRootCorrection2);
    }
  }
}

function adamwPass(w: Float32Array, g: Float32Array, m: Float32Array, v: Float32Array, start: number, end: number, beta1: number, beta2: number, eps: number, keep: number, stepSize: number, invRootCorrection2: number): void {
  const c1 = 1 - beta1;
  const c2 = 1 - beta2;
  for (let i = start; i < end; i++) {
    const gi = g[i]!;
    const mi = beta1 * m[i]! + c1 * gi;
    const vi = beta2 * v[i]! + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = keep * w[i]! - (stepSize * mi) / (Math.sqrt(vi) * invRootCorrection2 + eps);
  }
}
