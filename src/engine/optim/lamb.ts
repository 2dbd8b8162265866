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
 * first updates the moments and sums ‖w‖² and ‖u‖², the second recomputes u and moves the weights
 * (recomputing costs less than writing u out and reading it back).
 */
export class Lamb extends MomentOptimizer {
  declare readonly config: ResolvedLambConfig;
  /** [‖w‖², ‖u‖²] of the tensor in hand: scratch so the passes allocate nothing. */
  private readonly sums = new Float64Array(2);

  constructor(config: ResolvedLambConfig, layout: ParameterSet) {
    super(config, layout);
  }

  protected update(w: Float32Array, g: Float32Array, lr: number, t: number): void {
    const { betas, eps, clampValue, biasCorrection } = this.config;
    const [beta1, beta2] = betas;
    const correction = biasCorrection ? Math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t) : 1;
    const stepSize = lr * correction;
    const m = this.expAvg.data;
    const v = this.expAvgSq.data;
    const sums = this.sums;
    for (let k = 0; k < this.specs.length; k++) {
      const { offset, size } = this.specs[k]!;
      const end = offset + size;
      const decay = this.decay[k]!;
      momentsAndNorms(w, g, m, v, offset, end, beta1, beta2, eps, decay, sums);
      const weightNorm = Math.min(Math.sqrt(sums[0]!), clampValue);
      const updateNorm = Math.sqrt(sums[1]!);
      const trust = weightNorm === 0 || updateNorm === 0 ? 1 : weightNorm / updateNorm;
      applyUpdate(w, m, v, offset, end, eps, decay, stepSize * trust);
    }
  }
}

/** Pass 1 over [start, end): moments in place; sums[0] = ‖w‖², sums[1] = ‖u‖². */
function momentsAndNorms(w: Float32Array, g: Float32Array, m: Float32Array, v: Float32Array, start: number, end: number, beta1: number, beta2: number, eps: number, decay: number, sums: Float64Array): void {
  const c1 = 1 - beta1;
  const c2 = 1 - beta2;
  let ww = 0;
  let uu = 0;
  for (let i = start; i < end; i++) {
    const gi = g[i]!;
    const wi = w[i]!;
    const mi = beta1 * m[i]! + c1 * gi;
    const vi = beta2 * v[i]! + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const u = mi / (Math.sqrt(vi) + eps) + decay * wi;
    ww += wi * wi;
    uu += u * u;
  }
  sums[0] = ww;
  sums[1] = uu;
}

/** Pass 2 over [start, end): w ← w − scale·(m/(√v+ε) + λw). */
function applyUpdate(w: Float32Array, m: Float32Array, v: Float32Array, start: number, end: number, eps: number, decay: number, scale: number): void {
  const keep = 1 - scale * decay;
  for (let i = start; i < end; i++) {
    w[i] = keep * w[i]! - (scale * m[i]!) / (Math.sqrt(v[i]!) + eps);
  }
}
