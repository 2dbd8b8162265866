/**
 * Optimizer hyperparameters: what callers pass (every field but `kind` optional) and what the
 * optimizers use (every field resolved and validated once, at construction).
 */

/** Which tensors are exempt from weight decay, decided by parameter name. */
export type DecayExclusion = (name: string) => boolean;

/**
 * Hugging Face's rule, used by hivemind's ALBERT trainer: `no_decay = ["bias", "LayerNorm.weight"]`
 * matched as substrings of the parameter name, so every bias and every LayerNorm weight is exempt —
 * except ALBERT's `full_layer_layer_norm.weight`, whose lower-case name the rule misses (so it is
 * decayed there too; kept for fidelity with the reference run).
 */
const HF_NO_DECAY: readonly string[] = ['bias', 'LayerNorm.weight'];

export const hfNoDecay: DecayExclusion = (name) => HF_NO_DECAY.some((part) => name.includes(part));

interface CommonInit {
  /**
   * Peak learning rate: the input to the schedule (`linearWarmupDecay`); `step()` takes the scheduled
   * value each step.
   */
  readonly lr?: number;
  /** Decay rates of the first and second moment averages. @default [0.9, 0.999] */
  readonly betas?: readonly [number, number];
  /** Added to √v in the denominator. */
  readonly eps?: number;
  /** Decoupled weight decay coefficient. @default 0.01 */
  readonly weightDecay?: number;
  /** Tensors exempt from weight decay. @default hfNoDecay (biases and LayerNorm weights) */
  readonly decayExcluded?: DecayExclusion;
}

/** LAMB exactly as `torch_optimizer.Lamb`, which hivemind's ALBERT trainer uses. */
export interface LambInit extends CommonInit {
  readonly kind: 'lamb';
  /**
   * Upper clamp on each tensor's weight norm ‖w‖ before the trust ratio ‖w‖/‖update‖ is formed
   * (`torch_optimizer.Lamb(clamp_value=…)`, whose own default is 10). `Infinity` disables it.
   * @default 10000, as hivemind's ALBERT run passes
   */
  readonly clampValue?: number;
  /** Scale the step by √(1−β₂ᵗ)/(1−β₁ᵗ) (`debias=True` in hivemind's run). @default true */
  readonly biasCorrection?: boolean;
}

/** AdamW with `torch.optim.AdamW` semantics: weight decay applied to the weights, not the gradient. */
export interface AdamWInit extends CommonInit {
  readonly kind: 'adamw';
}

export type OptimizerConfig = LambInit | AdamWInit;
export type OptimizerKind = OptimizerConfig['kind'];

export interface ResolvedLambConfig {
  readonly kind: 'lamb';
  readonly lr: number;
  readonly betas: readonly [number, number];
  readonly eps: number;
  readonly weightDecay: number;
  readonly clampValue: number;
  readonly biasCorrection: boolean;
  readonly decayExcluded: DecayExclusion;
}

export interface ResolvedAdamWConfig {
  readonly kind: 'adamw';
  readonly lr: number;
  readonly betas: readonly [number, number];
  readonly eps: number;
  readonly weightDecay: number;
  readonly decayExcluded: DecayExclusion;
}

export type ResolvedOptimizerConfig = ResolvedLambConfig | ResolvedAdamWConfig;

/** hivemind's ALBERT-large run (examples/albert): LAMB lr 0.00176, eps 1e-6, weight decay 0.01, clamp value 10000. */
export const LAMB_DEFAULTS = { lr: 0.00176, betas: [0.9, 0.999], eps: 1e-6, weightDecay: 0.01, clampValue: 10000, biasCorrection: true } as const;

/** torch.optim.AdamW's betas and eps; lr and weight decay as the ALBERT run. */
const ADAMW_DEFAULTS = { lr: 0.00176, betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0.01 } as const;

export function resolveOptimizerConfig(config: OptimizerConfig): ResolvedOptimizerConfig {
  const kind: unknown = config.kind;
  if (kind !== 'lamb' && kind !== 'adamw') throw new RangeError(`optimizer kind ${JSON.stringify(kind)} is unknown; accepted: lamb, adamw`);
  const defaults = config.kind === 'lamb' ? LAMB_DEFAULTS : ADAMW_DEFAULTS;
  const lr = check('lr', config.lr ?? defaults.lr, (x) => x >= 0 && Number.isFinite(x), 'a finite number ≥ 0');
  const [beta1, beta2] = config.betas ?? defaults.betas;
  check('betas[0]', beta1, (x) => x >= 0 && x < 1, 'in [0, 1)');
  check('betas[1]', beta2, (x) => x >= 0 && x < 1, 'in [0, 1)');
  const eps = check('eps', config.eps ?? defaults.eps, (x) => x > 0 && Number.isFinite(x), 'a finite number > 0');
  const weightDecay = check('weightDecay', config.weightDecay ?? defaults.weightDecay, (x) => x >= 0 && Number.isFinite(x), 'a finite number ≥ 0');
  const decayExcluded = config.decayExcluded ?? hfNoDecay;
  const common = { lr, betas: [beta1, beta2] as const, eps, weightDecay, decayExcluded };
  if (config.kind === 'adamw') return { kind: 'adamw', ...common };
  const clampValue = check('clampValue', config.clampValue ?? LAMB_DEFAULTS.clampValue, (x) => x > 0, 'a number > 0 (Infinity disables the clamp)');
  return { kind: 'lamb', ...common, clampValue, biasCorrection: config.biasCorrection ?? LAMB_DEFAULTS.biasCorrection };
}

/** The JSON-safe part of a resolved config (everything but the exclusion predicate), for checkpoints and logs. */
export function describeConfig(config: ResolvedOptimizerConfig): Record<string, number | boolean | string | number[]> {
  const { decayExcluded: _predicate, betas, ...rest } = config;
  // JSON has no Infinity (an unclamped LAMB); spell it as a string rather than lose it to null
  const entries = Object.entries<number | boolean | string>(rest).map(([k, v]): [string, number | boolean | string] => [k, typeof v === 'number' && !Number.isFinite(v) ? String(v) : v]);
  return { ...Object.fromEntries(entries), betas: [...betas] };
}

function check(field: string, value: number, ok: (x: number) => boolean, accepted: string): number {
  if (typeof value !== 'number' || !ok(value)) throw new RangeError(`optimizer ${field} must be ${accepted}; got ${String(value)}`);
  return value;
}
