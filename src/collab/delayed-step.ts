/**
 * hivemind's delay_optimizer_step: the optimizer step of an ended epoch is taken while the next
 * micro-batch is being computed, and lands one micro-batch late. A backend may read the parameter
 * buffer during a run (OrtBackend does, on the JS thread; WorkerBackend copies it when called and
 * computes in a worker, so there the step truly runs beside the micro-batch), so micro-batches are
 * computed on a separate *compute copy* while the step
 * updates the *master* parameters; the master is copied into the compute copy only between
 * micro-batches (`publish`). Without the delay there is one buffer and nothing is ever pending.
 */
import type { ParameterSet } from '../engine/index.js';

export class DelayedStep {
  /** The parameters micro-batches are computed on (the master itself when the step is not delayed). */
  readonly compute: ParameterSet;
  /** The optimizer step waiting to be taken on the master (at most one). */
  private pending: (() => void) | undefined;
  /** The master changed since it was last copied into the compute copy. */
  private stale = false;

  constructor(
    private readonly master: ParameterSet,
    readonly enabled: boolean,
  ) {
    this.compute = enabled ? master.clone() : master;
  }

  get isPending(): boolean {
    return this.pending !== undefined;
  }

  /** Delays `step` (an update of the master) when enabled; otherwise takes it now. */
  defer(step: () => void): void {
    if (!this.enabled) return step();
    if (this.pending) throw new Error('delay_optimizer_step: an optimizer step is already pending; take it (run) before deferring the next');
    this.pending = step;
  }

  /** Takes the pending step on the master, if any (safe while a micro-batch reads the compute copy). */
  run(): boolean {
    const step = this.pending;
    if (!step) return false;
    this.pending = undefined;
    step();
    this.stale = true;
    return true;
  }

  /** Drops the pending step: the master was replaced (a state load), so the update is for an older model. */
  discard(): void {
    this.pending = undefined;
    this.masterChanged();
  }

  /** Marks the master as changed outside the step (state load, state averaging). */
  masterChanged(): void {
    if (this.enabled) this.stale = true;
  }

  /** Copies the master into the compute copy; only between micro-batches (no run reads the compute copy). */
  publish(): void {
    if (!this.stale) return;
    this.stale = false;
    this.compute.data.set(this.master.data);
  }

  /**
   * One micro-batch with the pending step taken meanwhile: publishes the master, starts `work` on the
   * compute copy, takes the pending step on the master, then waits for `work`. The step's update
   * reaches the compute copy at the next call, so `work` ran on the parameters before it.
   */
  async overlap<T>(work: (compute: ParameterSet) => Promise<T>): Promise<T> {
    this.publish();
    const running = work(this.compute);
    try {
      this.run();
    } catch (err) {
      await running.catch(() => undefined); // the step's error is the one to report
      throw err;
    }
    return running;
  }
}
