/**
 * The collaborative optimizer's options, as hivemind / Lightning's CollaborativeStrategy name them
 * (times in seconds), with their defaults: one schema, so a default exists once and an explicit
 * `undefined` means "the default". See docs/collab.md for what each does.
 */
import { z } from 'zod';
import { COMPRESSIONS } from '../averaging/compression.js';
import { DEFAULT_AGGREGATION, DEFAULT_POWERSGD_MIN_RATIO, DEFAULT_POWERSGD_RANK, GRAD_AVERAGERS } from '../averaging/constants.js';
import { dataPinsSchema } from '../averaging/messages.js';
import { AGGREGATIONS } from '../averaging/reducer.js';
import type { AveragingMode } from '../shared/api.js';
import { RECORD_NAMESPACE_TTL_MS } from '../swarm/constants.js';
import { PROGRESS_NAMESPACE } from './records.js';
import { DEFAULT_INNER_STEPS, DEFAULT_OUTER_LR, DEFAULT_OUTER_MOMENTUM, OUTER_OPTIMIZERS } from './outer-optimizer.js';

const int = z.number().int();
const positive = z.number().finite().positive();
const seconds = positive;

/** Each option's schema and default (the `cohort run` flags of the peer-local ones are rows over these). */
const collaborativeOptionsObject = z.object({
  /** Samples the swarm gathers per optimizer step (target_batch_size). */
  targetBatchSize: int.min(1).max(10_000_000),
  peakLr: positive,
  warmupSteps: int.min(0),
  totalSteps: int.min(1),
  /** How long peers wait to form an averaging group (matchmaking_time). */
  matchmakingTime: seconds.default(5),
  /** Limit on one gradient all-reduce (averaging_timeout). */
  averagingTimeout: seconds.default(60),
  /** Lifetime of a peer's group declaration (averaging_expiration). @default max(matchmakingTime, 15) */
  averagingExpiration: seconds.optional(),
  /** Wire compression of gradients (grad_compression). */
  gradCompression: z.enum(COMPRESSIONS).default('none'),
  /** Peers per averaging group; a group closes early once this many joined (target_group_size). */
  targetGroupSize: int.min(1).max(256).default(256),
  /**
   * hivemind's average_state_every: at the end of every epoch E with E % N = 0 the peers all-reduce
   * their parameters (uniform weights, group key = E), so peers whose models drifted apart (local
   * steps after failed gradient all-reduces, `useLocalUpdates`) re-converge. Skipped when this peer
   * sees no other peer. @default 1 with useLocalUpdates, otherwise never (hivemind's default is 1 in
   * both cases; with gradient averaging peers take identical steps, so Cohort saves the second
   * all-reduce unless asked)
   */
  averageStateEvery: int.min(1).optional(),
  /** How reducers combine the members' parts: robust to one hostile member (centered-clip, trimmed-mean) or hivemind's mean. */
  aggregation: z.enum(AGGREGATIONS).default(DEFAULT_AGGREGATION),
  /**
   * How gradients are averaged: `plain` (as they are, in `gradCompression`'s wire format) or
   * `powersgd` (hivemind's PowerSGDGradientAverager: matrices as rank-`powersgdRank` factors in two
   * all-reduces, with error feedback). Run-wide: peers of the two never group.
   */
  gradAverager: z.enum(GRAD_AVERAGERS).default('plain'),
  /** PowerSGD's rank (averager_rank). */
  powersgdRank: int.min(1).max(1024).default(DEFAULT_POWERSGD_RANK),
  /** PowerSGD compresses a matrix only when that saves at least this share of its values (min_compression_ratio). */
  powersgdMinRatio: z.number().min(0).lt(1).default(DEFAULT_POWERSGD_MIN_RATIO),
  /**
   * DiLoCo (`diloco`): each peer takes up to `innerSteps` LAMB steps on its own micro-batches from
   * θ_start, then the peers average the pseudo-gradient θ_start − θ (in `gradCompression`'s wire
   * format) and take one outer Nesterov step of θ_start: that step is the swarm's epoch. `none`:
   * gradients are averaged every epoch. Run-wide: the two never group.
   */
  outerOptimizer: z.enum(OUTER_OPTIMIZERS).default('none'),
  /** DiLoCo's H: a peer's inner steps per round at most; the round ends sooner once the swarm gathered `targetBatchSize` samples. */
  innerSteps: int.min(1).max(1_000_000).default(DEFAULT_INNER_STEPS),
  /**
   * DiLoCo: samples per inner step. A peer accumulates micro-batches (sample-weighted, as an epoch's
   * gradient) until it holds at least this many, then takes one LAMB step, so an inner step has a
   * data-parallel step's batch whatever micro-batch a volunteer's memory allows. Absent: every
   * micro-batch is an inner step.
   */
  innerBatchSize: int.min(1).max(10_000_000).optional(),
  /** DiLoCo's outer learning rate. */
  outerLr: positive.max(10).default(DEFAULT_OUTER_LR),
  /** DiLoCo's outer Nesterov momentum (0: plain SGD). */
  outerMomentum: z.number().min(0).lt(1).default(DEFAULT_OUTER_MOMENTUM),
  /**
   * DiLoCo's one-step-delayed outer update (Streaming DiLoCo's overlap): a peer that ended its round
   * averages its pseudo-gradient in the background and goes on with inner steps; the outer step lands
   * when the round ends and re-bases the inner steps taken meanwhile on the new θ_start. Run-wide.
   */
  outerOverlap: z.boolean().default(false),
  /** The run's seed: PowerSGD's first Q matrices are drawn from it, the same on every peer. */
  seed: int.min(0).max(2 ** 32 - 1).default(0),
  /** Wire compression of state averaging (state_averaging_compression). */
  stateAveragingCompression: z.enum(COMPRESSIONS).default('none'),
  /**
   * hivemind's average_opt_statistics: state averaging also averages the optimizer's moments (LAMB
   * exp_avg and exp_avg_sq), tripling its traffic; the step count stays each peer's own.
   */
  averageOptStatistics: z.boolean().default(false),
  /**
   * hivemind's use_local_updates: every micro-batch this peer clips its own gradient and takes a LAMB
   * step at once (learning rate of the epoch being gathered); gradients are never averaged. The swarm
   * still counts samples towards `targetBatchSize` to advance the epoch, and parameters are averaged
   * every `averageStateEvery` epochs.
   */
  useLocalUpdates: z.boolean().default(false),
  /**
   * hivemind's delay_grad_averaging: the gradient all-reduce of an ended epoch runs in the background
   * while this peer computes the next epoch's micro-batches (on the parameters before that step); the
   * step is applied between micro-batches once the round ends, so updates land one or more
   * micro-batches late. The epoch advances when the round begins. Not with useLocalUpdates; needs
   * delayOptimizerStep (as in hivemind).
   */
  delayGradAveraging: z.boolean().default(false),
  /**
   * hivemind's delay_optimizer_step: the optimizer step (clip + LAMB) of an ended epoch is taken
   * during the next micro-batch, on the master parameters, while that micro-batch is computed on a
   * copy holding the parameters before the step (one micro-batch of staleness). Not with
   * useLocalUpdates. @default delayGradAveraging
   */
  delayOptimizerStep: z.boolean().optional(),
  /**
   * hivemind's batch_size_lead: begin the epoch's averaging once the swarm is within this many
   * samples of `targetBatchSize`, so groups form while slower peers finish.
   */
  batchSizeLead: int.min(0).default(0),
  /** Lifetime of the progress record (hivemind's metadata_expiration); holders refuse one living longer than the namespace allows. */
  metadataExpiration: seconds.max(RECORD_NAMESPACE_TTL_MS[PROGRESS_NAMESPACE]! / 1000).default(120),
  /** Upper bound on how long a peer trusts its last view of the swarm. */
  maxRefresh: seconds.default(30),
  maxGradNorm: positive.default(1),
  /** The run's data (dataset id and tokenizer sha256), which this peer trains on: peers with other data are never averaged with. null: none pinned. */
  data: dataPinsSchema.nullable().default(null),
  displayName: z.string().min(1).max(64).optional(),
  /** Peer ids whose advertised state backs an epoch on their own (the join code's: the run's coordinator); others need a second backer. */
  trustedPeers: z.array(z.string().min(1).max(128)).max(64).default([]),
  /** Upload cap in bytes/s for this peer's averaging traffic (the volunteer's bandwidth setting); absent: no cap. */
  uploadLimit: positive.optional(),
  /**
   * hivemind's backup_every_steps: every N epochs this peer keeps a copy of its parameters and
   * optimizer state in memory; a step that leaves non-finite parameters restores it (and the peer
   * then loads the swarm's state when the swarm is ahead). Costs one more copy of the state.
   */
  backupEverySteps: int.min(1).max(1_000_000).default(10),
  /**
   * Micro-batches in a row with a non-finite loss or gradient (each is skipped) after which this peer
   * stops joining gradient averaging until a finite one comes: it must not offer poison to the swarm.
   */
  maxBadMicroBatches: int.min(1).max(1_000_000).default(10),
  /**
   * Test-only fault injection, never set in production: this peer claims `inflateClaims`× the
   * samples it processed; the gradients of its first `nonFiniteMicroBatches` micro-batches hold a NaN
   * (as from a broken engine).
   */
  fault: z.object({ inflateClaims: positive.optional(), nonFiniteMicroBatches: int.min(1).max(1_000_000).optional() }).optional(),
});
export const COLLABORATIVE_OPTION_FIELDS = collaborativeOptionsObject.shape;

const collaborativeOptionsSchema = collaborativeOptionsObject.transform((o) => ({
  ...o,
  averagingExpiration: o.averagingExpiration ?? Math.max(o.matchmakingTime, 15),
  delayOptimizerStep: o.delayOptimizerStep ?? o.delayGradAveraging,
  /** 0: never. */
  averageStateEvery: o.averageStateEvery ?? (o.useLocalUpdates ? 1 : 0),
}));

/** The options a caller passes (defaults may be left out, or undefined). */
export type CollaborativeOptions = z.input<typeof collaborativeOptionsSchema>;
export type ResolvedCollaborativeOptions = z.output<typeof collaborativeOptionsSchema>;

/** Options with their defaults; a value out of range or a combination hivemind refuses is a RangeError naming the option. */
export function resolveCollaborativeOptions(options: CollaborativeOptions): ResolvedCollaborativeOptions {
  const parsed = collaborativeOptionsSchema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new RangeError(`${hivemindName(String(issue.path[0] ?? 'options'))}: ${issue.message}`);
  }
  const o = parsed.data;
  if (o.batchSizeLead >= o.targetBatchSize) throw new RangeError(`batch_size_lead ${o.batchSizeLead} must be an integer from 0 to target_batch_size − 1 (${o.targetBatchSize - 1})`);
  if (o.useLocalUpdates && o.delayGradAveraging) throw new RangeError('delay_grad_averaging needs gradient averaging, which use_local_updates turns off');
  // hivemind: "delay_grad_averaging requires delay_optimizer_step"
  if (o.delayGradAveraging && !o.delayOptimizerStep) throw new RangeError('delay_grad_averaging needs delay_optimizer_step (its default); got delay_optimizer_step false');
  // use_local_updates steps on the caller's gradient buffer, which the next micro-batch overwrites
  if (o.useLocalUpdates && o.delayOptimizerStep) throw new RangeError('delay_optimizer_step is not supported with use_local_updates: the local step runs on every micro-batch');
  if (o.outerOptimizer === 'diloco') {
    // DiLoCo's inner steps are its own local updates, its round the one all-reduce, taken at once
    if (o.useLocalUpdates) throw new RangeError('outer_optimizer diloco takes its own local steps: use_local_updates must be off');
    if (o.gradAverager !== 'plain') throw new RangeError(`outer_optimizer diloco averages its pseudo-gradient as it is: grad_averager must be plain, not ${o.gradAverager}`);
    if (o.delayOptimizerStep) throw new RangeError('delay_optimizer_step and delay_grad_averaging are not supported with outer_optimizer diloco');
  }
  if (o.outerOverlap && o.outerOptimizer !== 'diloco') throw new RangeError(`outer_overlap delays DiLoCo's outer step: it needs outer_optimizer diloco, not ${o.outerOptimizer}`);
  if (o.innerBatchSize !== undefined && o.outerOptimizer !== 'diloco') throw new RangeError(`inner_batch_size sets DiLoCo's inner steps: it needs outer_optimizer diloco, not ${o.outerOptimizer}`);
  if (o.averagingExpiration < o.matchmakingTime) throw new RangeError(`averaging_expiration ${o.averagingExpiration} must be at least matchmaking_time ${o.matchmakingTime}`);
  return o;
}

/** How a run averages (its gradient averager and outer optimizer; absent ones are their defaults), as the dashboard and the per-epoch log line name it. */
export function averagingModeOf(o: Pick<CollaborativeOptions, 'gradAverager' | 'outerOptimizer'>): AveragingMode {
  return o.outerOptimizer === 'diloco' ? 'diloco' : o.gradAverager === 'powersgd' ? 'powersgd' : 'plain';
}

/** `averageStateEvery` → `average_state_every`, as hivemind users know the options. */
function hivemindName(key: string): string {
  return key.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase());
}
