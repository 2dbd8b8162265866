export interface LinearWarmupDecay {
  /** Learning rate reached at the end of warmup. */
  readonly peakLr: number;
  /** Steps of linear warmup from 0 (ALBERT: 5000). */
  readonly warmupSteps: number;
  /** Step at which the rate has decayed linearly to 0 (ALBERT: 125000). */
  readonly totalSteps: number;
}

/**
 * The learning rate at `step`, as Hugging Face's `get_linear_schedule_with_warmup`:
 * peak·step/warmup while step < warmup, then peak·(total−step)/(total−warmup), never below 0.
 * A pure function of the step: the collaborative optimizer feeds it swarm epochs, not local steps.
 */
export function linearWarmupDecay(step: number, schedule: LinearWarmupDecay): number {
  const { peakLr, warmupSteps, totalSteps } = schedule;
  if (!(step >= 0 && Number.isFinite(step))) throw new RangeError(`schedule step must be a finite number ≥ 0; got ${step}`);
  if (!(peakLr >= 0 && Number.isFinite(peakLr))) throw new RangeError(`schedule peakLr must be a finite number ≥ 0; got ${peakLr}`);
  if (!(Number.isSafeInteger(warmupSteps) && warmupSteps >= 0)) throw new RangeError(`schedule warmupSteps must be an integer ≥ 0; got ${warmupSteps}`);
  if (!(Number.isSafeInteger(totalSteps) && totalSteps > warmupSteps)) throw new RangeError(`schedule totalSteps must be an integer > warmupSteps (${warmupSteps}); got ${totalSteps}`);
  if (step < warmupSteps) return (peakLr * step) / warmupSteps;
  return Math.max(0, (peakLr * (totalSteps - step)) / (totalSteps - warmupSteps));
}
