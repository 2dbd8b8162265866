import type { LossScalerState } from '../loss-scaler.js';
import type { ParameterSet, ParamView } from '../params.js';
import { describeConfig, type OptimizerKind, type ResolvedOptimizerConfig } from './config.js';
import { assertSameLayout, LayoutGuard } from './layout.js';
import { MomentMemory } from './moment-memory.js';

/** Everything an optimizer needs to continue exactly where it stopped (part of a checkpoint). */
export interface OptimizerState {
  readonly kind: OptimizerKind;
  /** Number of updates applied so far (t in the bias corrections). */
  readonly step: number;
  /** First moment m, same layout as the parameters. */
  readonly expAvg: ParameterSet;
  /** Second moment v, same layout as the parameters. */
  readonly expAvgSq: ParameterSet;
  /** The hyperparameters the state was produced with, for the record; importing does not apply them. */
  readonly config: Record<string, unknown>;
  /**
   * fp16 training's DynamicLossScaler state, saved beside the moments (as torch checkpoints keep
   * GradScaler's); the optimizer itself ignores it (set by the trainer that owns the scaler).
   */
  readonly lossScaler?: LossScalerState;
}

/** Sets with the parameters' layout that moments are copied into. */
export interface Moments {
  readonly expAvg: ParameterSet;
  readonly expAvgSq: ParameterSet;
}

export interface Optimizer {
  readonly config: ResolvedOptimizerConfig;
  /** Updates applied so far. */
  readonly stepCount: number;
  /**
   * One update of `params` in place from `grads` at learning rate `lr` (the scheduled value).
   * Both must have the layout the optimizer was created for. Gradients must be finite: check them
   * first (`clipGradNorm` throws on NaN/Inf), since a non-finite gradient poisons the moments.
   */
  step(params: ParameterSet, grads: ParameterSet, lr: number): void;
  /**
   * A copy of the state (safe to serialize while training continues). With `into`, the moments are
   * copied into its sets (the parameters' layout) instead of newly allocated ones: a large state
   * exported again and again (backups, saves) allocates nothing.
   */
  exportState(into?: Moments): OptimizerState;
  /**
   * Copies the moments of the tensors [first, end) (layout order) into sets of the parameters'
   * layout: a large state can be snapshotted a few tensors at a time, yielding in between.
   */
  copyMoments(into: Moments, first: number, end: number): void;
  /** Replaces the state with a copy of `state`; throws naming the first tensor whose layout differs. */
  importState(state: OptimizerState): void;
}

/**
 * What LAMB and AdamW share: the moments (preallocated once, in the kernels' memory), the step
 * count, per-tensor weight decay decided by name once, layout checks and state import/export.
 */
export abstract class MomentOptimizer implements Optimizer {
  protected readonly moments: MomentMemory;
  /** Weight decay of each tensor in layout order (0 for exempt tensors). */
  protected readonly decay: Float64Array;
  protected readonly specs: readonly ParamView[];
  private steps = 0;
  private readonly guard: LayoutGuard;

  constructor(
    readonly config: ResolvedOptimizerConfig,
    private readonly layout: ParameterSet,
  ) {
    this.specs = layout.specs;
    this.guard = new LayoutGuard(layout);
    this.moments = new MomentMemory(layout.specs);
    this.decay = Float64Array.from(layout.specs, (s) => (config.decayExcluded(s.name) ? 0 : config.weightDecay));
  }

  get stepCount(): number {
    return this.steps;
  }

  step(params: ParameterSet, grads: ParameterSet, lr: number): void {
    if (!(lr >= 0 && Number.isFinite(lr))) throw new RangeError(`learning rate must be a finite number ≥ 0; got ${lr}`);
    this.guard.check(params, 'params');
    this.guard.check(grads, 'grads');
    if (params.data === grads.data) throw new Error('params and grads share one buffer; pass the gradients in their own ParameterSet');
    this.steps += 1;
    this.update(params.data, grads.data, lr, this.steps);
  }

  /** Applies update number `t` (1-based) to the flat buffers. */
  protected abstract update(w: Float32Array, g: Float32Array, lr: number, t: number): void;

  exportState(into: Moments = { expAvg: this.layout.zerosLike(), expAvgSq: this.layout.zerosLike() }): OptimizerState {
    this.copyMoments(into, 0, this.specs.length);
    return { kind: this.config.kind, step: this.steps, expAvg: into.expAvg, expAvgSq: into.expAvgSq, config: describeConfig(this.config) };
  }

  copyMoments(into: Moments, first: number, end: number): void {
    assertSameLayout(this.layout, into.expAvg, 'moment copy exp_avg');
    assertSameLayout(this.layout, into.expAvgSq, 'moment copy exp_avg_sq');
    this.moments.copyOut('m', into.expAvg, first, end);
    this.moments.copyOut('v', into.expAvgSq, first, end);
  }

  importState(state: OptimizerState): void {
    if (state.kind !== this.config.kind) throw new Error(`optimizer state is for ${state.kind}, this optimizer is ${this.config.kind}`);
    if (!Number.isSafeInteger(state.step) || state.step < 0) throw new Error(`optimizer state step must be an integer ≥ 0; got ${state.step}`);
    assertSameLayout(this.layout, state.expAvg, 'optimizer state exp_avg');
    assertSameLayout(this.layout, state.expAvgSq, 'optimizer state exp_avg_sq');
    this.moments.copyIn('m', state.expAvg);
    this.moments.copyIn('v', state.expAvgSq);
    this.steps = state.step;
  }
}
