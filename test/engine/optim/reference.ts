/**
 * Straightforward float64 reference optimizers for the tests, written from the published
 * algorithms (torch.optim.AdamW's documentation; LAMB as `torch_optimizer.Lamb` with debias), one
 * tensor at a time with plain loops and arrays, sharing no code with src/engine/optim.
 */
export interface RefTensor {
  name: string;
  w: number[];
}

export interface RefHyper {
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** Names exempt from weight decay. */
  noDecay: (name: string) => boolean;
}

export class RefOptimizer {
  t = 0;
  readonly m: number[][];
  readonly v: number[][];

  constructor(
    readonly kind: 'lamb' | 'adamw',
    readonly tensors: RefTensor[],
    readonly h: RefHyper & { clamp?: number; debias?: boolean },
  ) {
    this.m = tensors.map((x) => x.w.map(() => 0));
    this.v = tensors.map((x) => x.w.map(() => 0));
  }

  step(grads: number[][], lr: number): void {
    this.t += 1;
    const { beta1, beta2, eps } = this.h;
    this.tensors.forEach((tensor, k) => {
      const w = tensor.w;
      const g = grads[k]!;
      const m = this.m[k]!;
      const v = this.v[k]!;
      const wd = this.h.noDecay(tensor.name) ? 0 : this.h.weightDecay;
      for (let i = 0; i < w.length; i++) {
        m[i] = beta1 * m[i]! + (1 - beta1) * g[i]!;
        v[i] = beta2 * v[i]! + (1 - beta2) * g[i]! * g[i]!;
      }
      if (this.kind === 'adamw') {
        const mHatScale = 1 / (1 - beta1 ** this.t);
        const vHatScale = 1 / (1 - beta2 ** this.t);
        for (let i = 0; i < w.length; i++) {
          w[i] = w[i]! - lr * wd * w[i]!;
          const mHat = m[i]! * mHatScale;
          const vHat = v[i]! * vHatScale;
          w[i] = w[i]! - (lr * mHat) / (Math.sqrt(vHat) + eps);
        }
        return;
      }
      const debias = this.h.debias ?? true;
      const stepSize = lr * (debias ? Math.sqrt(1 - beta2 ** this.t) / (1 - beta1 ** this.t) : 1);
      const adamStep = w.map((wi, i) => m[i]! / (Math.sqrt(v[i]!) + eps) + wd * wi);
      const weightNorm = Math.min(norm(w), this.h.clamp ?? 10);
      const adamNorm = norm(adamStep);
      const trust = weightNorm === 0 || adamNorm === 0 ? 1 : weightNorm / adamNorm;
      for (let i = 0; i < w.length; i++) w[i] = w[i]! - stepSize * trust * adamStep[i]!;
    });
  }
}

function norm(x: number[]): number {
  let sq = 0;
  for (const xi of x) sq += xi * xi;
  return Math.sqrt(sq);
}
