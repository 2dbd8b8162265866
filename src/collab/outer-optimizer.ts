/**
 * DiLoCo's outer optimizer (Douillard et al. 2023): the swarm's parameters θ_start move once per
 * round by Nesterov SGD on the averaged pseudo-gradient Δ = θ_start − θ_after_inner_steps, as
 * PyTorch's SGD(nesterov=True): b ← μ·b + Δ; θ_start ← θ_start − lr·(Δ + μ·b). The momentum buffer b
 * is the state a newcomer downloads with θ_start (collab/state.ts) and the peer checkpoints with it.
 * With the one-step-delayed update the step lands after inner steps went on, and re-bases them on
 * the new θ_start. See docs/collab.md ("DiLoCo").
 */
import type { ParameterSet } from '../engine/index.js';

/** `none`: gradients are averaged every epoch (plain or PowerSGD); `diloco`: H local steps, then an outer step. */
export const OUTER_OPTIMIZERS = ['none', 'diloco'] as const;
/** DiLoCo's recipe: H = 500 in the paper; 50 keeps a round within minutes on a volunteer's CPU. */
export const DEFAULT_INNER_STEPS = 50;
export const DEFAULT_OUTER_LR = 0.7;
export const DEFAULT_OUTER_MOMENTUM = 0.9;

export class OuterNesterov {
  /** θ_start: the parameters every peer of the round began its inner steps from. */
  readonly start: ParameterSet;
  /** The momentum buffer b (zero until the first outer step). */
  readonly momentum: ParameterSet;

  constructor(
    params: ParameterSet,
    private readonly lr: number,
    private readonly mu: number,
  ) {
    this.start = params.zerosLike();
    this.start.data.set(params.data);
    this.momentum = params.zerosLike();
  }

  /** Writes this peer's pseudo-gradient θ_start − `params` into `into`. */
  pseudoGradient(params: ParameterSet, into: Float32Array): Float32Array {
    const s = this.start.data;
    const p = params.data;
    for (let i = 0; i < s.length; i++) into[i] = s[i]! - p[i]!;
    return into;
  }

  /**
   * One outer step of θ_start on the averaged pseudo-gradient `delta`; then `params` (θ) ← θ_start.
   * With `sent` (the one-step-delayed update: `sent` = θ_start − θ_sent is the pseudo-gradient this
   * peer sent, and it took inner steps since) θ ← θ_start_new + (θ − θ_sent) instead: the inner
   * progress made while the round was in flight stays on top of the new θ_start, and the next
   * pseudo-gradient, measured from θ_start_new, carries it.
   */
  step(delta: Float32Array, params: ParameterSet, sent?: Float32Array): void {
    const s = this.start.data;
    const b = this.momentum.data;
    const p = params.data;
    if (delta.length !== s.length) throw new RangeError(`outer step: pseudo-gradient of ${delta.length} values for ${s.length} parameters`);
    if (sent && sent.length !== s.length) throw new RangeError(`outer step: sent pseudo-gradient of ${sent.length} values for ${s.length} parameters`);
    for (let i = 0; i < s.length; i++) {
      const d = delta[i]!;
      const m = this.mu * b[i]! + d;
      b[i] = m;
      const old = s[i]!;
      s[i] = old - this.lr * (d + this.mu * m);
      // θ − θ_sent with θ_sent = θ_start_old − sent: no copy of θ_sent is kept
      if (sent) p[i] = s[i]! + (p[i]! - old + sent[i]!);
    }
    if (!sent) p.set(s);
  }

  /** Takes θ_start from `params` (after a state download or a restore) and, when given, the momentum (else zero). */
  reset(params: ParameterSet, momentum?: Float32Array): void {
    this.start.data.set(params.data);
    if (momentum) this.momentum.data.set(momentum);
    else this.momentum.data.fill(0);
  }
}
