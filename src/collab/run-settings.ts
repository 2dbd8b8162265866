/**
 * The run settings: what every peer of a swarm must agree on (model, data shape, schedule, averaging
 * wire formats), with their ranges and defaults; run-params.ts publishes them in the run record. Only
 * schemas and constants are imported here (no swarm, no onnxruntime), so `cohort`'s flag tables, rows
 * over these schemas, load without the runtime.
 */
import { z } from 'zod';
import { COMPRESSIONS } from '../averaging/compression.js';
import { DEFAULT_AGGREGATION, DEFAULT_POWERSGD_MIN_RATIO, DEFAULT_POWERSGD_RANK, GRAD_AVERAGERS } from '../averaging/constants.js';
import { AGGREGATIONS } from '../averaging/reducer.js';
import { PRESET_NAMES, PRESETS, type PresetName } from '../engine/albert/config.js';
import { LAMB_DEFAULTS } from '../engine/optim/config.js';
import { DEFAULT_INNER_STEPS, DEFAULT_OUTER_LR, DEFAULT_OUTER_MOMENTUM, OUTER_OPTIMIZERS } from './outer-optimizer.js';

const int = z.number().int();

/** The parameters peers must share; local ones (micro-batch, threads, precision, upload cap, timeouts) are not here. */
export const runSettingsSchema = z.strictObject({
  preset: z.enum(PRESET_NAMES as [PresetName, ...PresetName[]]),
  seqLen: int.min(5),
  targetBatchSize: int.min(1).max(10_000_000),
  /** Seed of the initial weights. */
  seed: int.min(0).max(2 ** 32 - 1),
  peakLr: z.number().finite().positive(),
  warmupSteps: int.min(0),
  totalSteps: int.min(1),
  gradCompression: z.enum(COMPRESSIONS),
  stateAveragingCompression: z.enum(COMPRESSIONS),
  /** Absent: the optimizer's default (every epoch with useLocalUpdates, else never). */
  averageStateEvery: int.min(1).optional(),
  averageOptStatistics: z.boolean(),
  useLocalUpdates: z.boolean(),
  batchSizeLead: int.min(0),
  /** How reducers combine their parts (averaging/reducer.ts). Absent: the default. */
  aggregation: z.enum(AGGREGATIONS).optional(),
  /** How gradients are averaged: `plain`, or `powersgd` (hivemind's PowerSGDGradientAverager). Absent: plain. */
  gradAverager: z.enum(GRAD_AVERAGERS).optional(),
  /** PowerSGD's rank (averager_rank). Absent: DEFAULT_POWERSGD_RANK. */
  powersgdRank: int.min(1).max(1024).optional(),
  /** PowerSGD compresses a matrix only when that saves at least this share of its values (min_compression_ratio). Absent: DEFAULT_POWERSGD_MIN_RATIO. */
  powersgdMinRatio: z.number().min(0).lt(1).optional(),
  /** `diloco`: H local LAMB steps, then an outer Nesterov step on the averaged pseudo-gradient (the epoch). Absent: none. */
  outerOptimizer: z.enum(OUTER_OPTIMIZERS).optional(),
  /** DiLoCo's inner steps per round at most (H). Absent: DEFAULT_INNER_STEPS. */
  innerSteps: int.min(1).max(1_000_000).optional(),
  /** DiLoCo's samples per inner step (micro-batches are accumulated up to it). Absent: one micro-batch per inner step. */
  innerBatchSize: int.min(1).max(10_000_000).optional(),
  /** DiLoCo's outer learning rate. Absent: DEFAULT_OUTER_LR. */
  outerLr: z.number().finite().positive().max(10).optional(),
  /** DiLoCo's outer Nesterov momentum. Absent: DEFAULT_OUTER_MOMENTUM. */
  outerMomentum: z.number().min(0).lt(1).optional(),
  /** DiLoCo's one-step-delayed outer update: the next round's inner steps overlap the averaging. Absent: false. */
  outerOverlap: z.boolean().optional(),
  /** LAMB's recipe beside the learning rate (hivemind's adam_beta1, adam_beta2, adam_epsilon, weight_decay, clamp_value). */
  adamBeta1: z.number().min(0).lt(1),
  adamBeta2: z.number().min(0).lt(1),
  adamEpsilon: z.number().positive().max(1),
  weightDecay: z.number().min(0).max(1),
  clampValue: z.number().finite().positive(),
  /** The global gradient-norm clip before each step (max_grad_norm). */
  maxGradNorm: z.number().finite().positive(),
});
export type RunSettings = z.infer<typeof runSettingsSchema>;
/** Each run setting's schema (`cohort run`'s run-wide flags are rows over these). */
export const RUN_SETTING_FIELDS = runSettingsSchema.shape;

type SettingsProblem = { field: keyof RunSettings; message: string } | undefined;

/** Why settings are invalid (a value out of its range, or a combination), by field (the CLI names the flag), or undefined. */
export function runSettingsProblem(s: RunSettings): SettingsProblem {
  const parsed = runSettingsSchema.safeParse(s);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { field: issue.path[0] as keyof RunSettings, message: `${String(s[issue.path[0] as keyof RunSettings])}: ${issue.message}` };
  }
  return combinationProblem(s);
}

/** Why a combination of (individually valid) settings is invalid. */
export function combinationProblem(s: RunSettings): SettingsProblem {
  const maxSeq = PRESETS[s.preset].maxPositionEmbeddings;
  if (s.seqLen > maxSeq) return { field: 'seqLen', message: `${s.seqLen} exceeds the ${s.preset} preset's ${maxSeq} positions` };
  if (s.warmupSteps >= s.totalSteps) return { field: 'warmupSteps', message: `${s.warmupSteps} is not an integer from 0 to ${s.totalSteps - 1} (less than the total steps ${s.totalSteps})` };
  if (s.batchSizeLead >= s.targetBatchSize) return { field: 'batchSizeLead', message: `${s.batchSizeLead} is not an integer from 0 to ${s.targetBatchSize - 1} (less than the target batch size ${s.targetBatchSize})` };
  if (s.outerOptimizer === 'diloco' && s.useLocalUpdates) return { field: 'useLocalUpdates', message: 'true: diloco takes its own local steps (--outer-optimizer diloco)' };
  if (s.outerOverlap === true && s.outerOptimizer !== 'diloco') return { field: 'outerOverlap', message: `true: the overlap delays DiLoCo's outer step (it needs --outer-optimizer diloco, not ${s.outerOptimizer ?? 'none'})` };
  if (s.innerBatchSize !== undefined && s.outerOptimizer !== 'diloco') return { field: 'innerBatchSize', message: `${s.innerBatchSize}: it sets DiLoCo's inner steps (it needs --outer-optimizer diloco, not ${s.outerOptimizer ?? 'none'})` };
  if (s.outerOptimizer === 'diloco' && (s.gradAverager ?? 'plain') !== 'plain') return { field: 'gradAverager', message: `${s.gradAverager}: diloco averages its pseudo-gradient as it is (--outer-optimizer diloco needs --grad-averager plain)` };
  return undefined;
}


/** A founder's settings where it chose none (`cohort run`'s flag defaults, the app, solo training). */
export const DEFAULT_RUN_SETTINGS: RunSettings = {
  preset: 'tiny',
  seqLen: 128,
  targetBatchSize: 4096,
  seed: 0,
  peakLr: LAMB_DEFAULTS.lr,
  warmupSteps: 50,
  totalSteps: 10_000,
  gradCompression: 'none',
  stateAveragingCompression: 'none',
  averageOptStatistics: false,
  useLocalUpdates: false,
  batchSizeLead: 0,
  aggregation: DEFAULT_AGGREGATION,
  gradAverager: 'plain',
  powersgdRank: DEFAULT_POWERSGD_RANK,
  powersgdMinRatio: DEFAULT_POWERSGD_MIN_RATIO,
  outerOptimizer: 'none',
  innerSteps: DEFAULT_INNER_STEPS,
  outerLr: DEFAULT_OUTER_LR,
  outerMomentum: DEFAULT_OUTER_MOMENTUM,
  outerOverlap: false,
  adamBeta1: LAMB_DEFAULTS.betas[0],
  adamBeta2: LAMB_DEFAULTS.betas[1],
  adamEpsilon: LAMB_DEFAULTS.eps,
  weightDecay: LAMB_DEFAULTS.weightDecay,
  clampValue: LAMB_DEFAULTS.clampValue,
  maxGradNorm: 1,
};

/**
 * Where a preset's defaults differ from DEFAULT_RUN_SETTINGS: `large` runs hivemind's examples/albert
 * recipe (its LAMB values are LAMB_DEFAULTS, so DEFAULT_RUN_SETTINGS' already).
 */
const PRESET_RUN_DEFAULTS: { readonly [P in PresetName]?: Partial<RunSettings> } = {
  large: { seqLen: 512, targetBatchSize: 4096, warmupSteps: 5000, totalSteps: 125_000, gradCompression: 'fp16', stateAveragingCompression: 'fp16' },
};

/** The settings a founder of `preset` runs where it chose none. */
export function defaultRunSettings(preset: PresetName): RunSettings {
  return { ...DEFAULT_RUN_SETTINGS, ...PRESET_RUN_DEFAULTS[preset], preset };
}
