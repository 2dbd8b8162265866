/**
 * Dynamic loss scaling for fp16 training, with torch.cuda.amp.GradScaler's semantics: gradients are
 * computed for loss × scale (so small ones do not flush to zero in float16) and unscaled before the
 * optimizer; a step whose gradients contain inf/NaN (an overflow) is skipped and the scale backs
 * off; after `growthInterval` consecutive finite steps the scale grows.
 */
export interface LossScalerOptions {
  /** Initial scale (default 2^16). */
  readonly initScale?: number;
  /** Multiplier after `growthInterval` finite steps in a row (default 2). */
  readonly growthFactor?: number;
  /** Multiplier after an overflow (default 0.5). */
  readonly backoffFactor?: number;
  /** Consecutive finite steps before the scale grows (default 2000). */
  readonly growthInterval?: number;
}

/** What a checkpoint keeps (torch's GradScaler.state_dict() fields, plus the skipped-step count). */
export interface LossScalerState {
  readonly scale: number;
  readonly growthFactor: number;
  readonly backoffFactor: number;
  readonly growthInterval: number;
  /** Consecutive finite steps since the last change of scale. */
  readonly growthTracker: number;
  /** Steps skipped because of an overflow, in total. */
  readonly skippedSteps: number;
}

export const LOSS_SCALER_DEFAULTS = { initScale: 2 ** 16, growthFactor: 2, backoffFactor: 0.5, growthInterval: 2000 } as const;

/**
 * Below this a non-finite gradient is not an fp16 overflow but a real inf/NaN (in the data or the
 * weights): backing off further would skip every step forever, so `update` throws instead.
 */
const MIN_LOSS_SCALE = 2 ** -24;

export class LossScaleError extends Error {
  override readonly name = 'LossScaleError';
}

export class DynamicLossScaler {
  private state: LossScalerState;

  constructor(options: LossScalerOptions = {}) {
    const o = { ...LOSS_SCALER_DEFAULTS, ...options };
    this.state = checkState({ scale: o.initScale, growthFactor: o.growthFactor, backoffFactor: o.backoffFactor, growthInterval: o.growthInterval, growthTracker: 0, skippedSteps: 0 });
  }

  /** The loss scale to compute the next step's gradients with. */
  get scale(): number {
    return this.state.scale;
  }

  get skippedSteps(): number {
    return this.state.skippedSteps;
  }

  /**
   * Records one step's outcome and returns whether to apply it: false (skip the optimizer step)
   * when the gradients were not finite, after backing the scale off.
   */
  update(gradsFinite: boolean): boolean {
    const s = this.state;
    if (!gradsFinite) {
      const scale = s.scale * s.backoffFactor;
      if (scale < MIN_LOSS_SCALE) throw new LossScaleError(`gradients are not finite even at loss scale ${s.scale}: not an fp16 overflow but inf/NaN in the model or the data`);
      this.state = { ...s, scale, growthTracker: 0, skippedSteps: s.skippedSteps + 1 };
      return false;
    }
    const grown = s.growthTracker + 1 >= s.growthInterval;
    this.state = { ...s, scale: grown ? s.scale * s.growthFactor : s.scale, growthTracker: grown ? 0 : s.growthTracker + 1 };
    return true;
  }

  exportState(): LossScalerState {
    return { ...this.state };
  }

  /** Continues from a checkpoint's state; throws LossScaleError naming the first bad field. */
  importState(state: LossScalerState): void {
    this.state = checkState(state);
  }
}

/** Validates every field (state may come from a checkpoint file). */
export function checkState(s: LossScalerState): LossScalerState {
  const field = (name: keyof LossScalerState, ok: (v: number) => boolean, what: string) => {
    const v = s[name];
    if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) throw new LossScaleError(`loss scaler ${name} ${JSON.stringify(v)} is invalid; accepted: ${what}`);
  };
  field('scale', (v) => v >= MIN_LOSS_SCALE, `a finite number ≥ ${MIN_LOSS_SCALE}`);
  field('growthFactor', (v) => v > 1, 'a number > 1');
  field('backoffFactor', (v) => v > 0 && v < 1, 'a number in (0, 1)');
  field('growthInterval', (v) => Number.isInteger(v) && v >= 1, 'an integer ≥ 1');
  field('growthTracker', (v) => Number.isInteger(v) && v >= 0 && v < s.growthInterval, 'an integer from 0 to growthInterval − 1');
  field('skippedSteps', (v) => Number.isInteger(v) && v >= 0, 'an integer ≥ 0');
  return { scale: s.scale, growthFactor: s.growthFactor, backoffFactor: s.backoffFactor, growthInterval: s.growthInterval, growthTracker: s.growthTracker, skippedSteps: s.skippedSteps };
}
