/**
 * `cohort run`'s flags as rows over the schemas that own their values: the run-wide ones over the run
 * record's settings (defaults: what a founder publishes), the peer's averaging ones over the
 * collaborative optimizer's options. Which run-wide flags the user gave decides what a joiner checks
 * against the swarm's record.
 */
import fs from 'node:fs';
import type { Command } from 'commander';
import { z } from 'zod';
import { COLLABORATIVE_OPTION_FIELDS as OPTION } from '../collab/options.js';
import { DEFAULT_RUN_SETTINGS, defaultRunSettings, RUN_SETTING_FIELDS as SETTING, runSettingsProblem, type RunSettings } from '../collab/run-settings.js';
import { ConfigError } from '../config/load.js';
import { PRECISIONS } from '../engine/albert/graph.js';
import { DEFAULT_LOCAL_TRAINER, DEFAULT_SAVE_STATE_MINUTES } from '../training/options.js';
import { flagOf, flagRow, givenFlags, tagged, type FlagRow, type FlagValues } from './flag-table.js';
import { DISK_RESERVE_FLAG } from './commands/data.js';
import { PRECISION_NOTE } from './commands/model.js';
import { METRICS_FLAGS } from './metrics-endpoint.js';
import { SWARM_FLAGS } from './reachability.js';

const int = z.number().int();
const positive = z.number().finite().positive();
const FAULT = OPTION.fault.unwrap().shape;

/** A run setting's flag: its schema is the run record's, its default what a founder publishes. */
function wide<K extends Exclude<keyof RunSettings, 'averageStateEvery' | 'innerBatchSize'>>(key: K, description: string, flag?: string): FlagRow<(typeof SETTING)[K]> & { default: NonNullable<RunSettings[K]> } {
  const row = { schema: SETTING[key], default: DEFAULT_RUN_SETTINGS[key], description, ...(flag ? { flag } : {}) };
  return row as FlagRow<(typeof SETTING)[K]> & { default: NonNullable<RunSettings[K]> };
}

/** The run settings' flags (`cohort train` uses some of them for its own run). */
export const RUN_SETTING_FLAGS = {
  preset: wide('preset', 'model size; large runs hivemind’s ALBERT recipe where the other run-wide flags are omitted (sequence 512, warmup 5000 of 125000 epochs, fp16 gradient and state compression)'),
  targetBatchSize: wide('targetBatchSize', 'samples the swarm gathers per optimizer step (target_batch_size)'),
  seqLen: wide('seqLen', 'tokens per sequence, at most the preset’s positions'),
  gradCompression: wide('gradCompression', 'gradient wire compression (grad_compression)'),
  averageStateEvery: flagRow({ schema: SETTING.averageStateEvery, description: 'all-reduce the parameters every N epochs (average_state_every; default 1 with --use-local-updates, else never)' }),
  stateAveragingCompression: wide('stateAveragingCompression', 'wire compression of state averaging (state_averaging_compression)'),
  averageOptStatistics: wide('averageOptStatistics', 'state averaging also averages the LAMB moments (average_opt_statistics)'),
  useLocalUpdates: wide('useLocalUpdates', 'step on every micro-batch without averaging gradients; parameters are averaged every --average-state-every epochs (use_local_updates)'),
  aggregation: wide('aggregation', "how reducers combine the members' gradients (centered-clip and trimmed-mean bound what one hostile member can do; mean is hivemind's)"),
  gradAverager: wide('gradAverager', 'how gradients are averaged: plain, or powersgd (low-rank factors with error feedback, hivemind’s PowerSGDGradientAverager)'),
  powersgdRank: wide('powersgdRank', 'PowerSGD’s rank (averager_rank)'),
  powersgdMinRatio: wide('powersgdMinRatio', 'PowerSGD compresses a matrix only when that saves at least this share of its values (min_compression_ratio)'),
  outerOptimizer: wide('outerOptimizer', 'none, or diloco: each peer takes up to --inner-steps local LAMB steps, then the peers average θ_start − θ and take one outer Nesterov step (an epoch)'),
  innerSteps: wide('innerSteps', 'DiLoCo: local steps per round at most; the round ends sooner once the swarm gathered the target batch'),
  innerBatchSize: flagRow({ schema: SETTING.innerBatchSize, description: 'DiLoCo: samples per local step; a peer accumulates micro-batches up to it (default: each micro-batch is a step)' }),
  outerLr: wide('outerLr', 'DiLoCo: outer Nesterov learning rate'),
  outerMomentum: wide('outerMomentum', 'DiLoCo: outer Nesterov momentum (0: none)'),
  outerOverlap: wide('outerOverlap', 'DiLoCo: average a round’s pseudo-gradient in the background while the next round’s inner steps run; its outer step lands when the round ends (one-step-delayed outer update)'),
  batchSizeLead: wide('batchSizeLead', 'begin averaging when the swarm is this many samples short of the target batch (batch_size_lead)'),
  peakLr: wide('peakLr', 'peak learning rate (LAMB; cohort train --optimizer adamw: AdamW)', '--lr'),
  warmupSteps: wide('warmupSteps', 'warmup in swarm epochs'),
  totalSteps: wide('totalSteps', 'swarm epochs at which the learning rate has decayed to 0'),
  seed: wide('seed', 'seed of the initial weights (the same on every peer)'),
  adamBeta1: wide('adamBeta1', 'LAMB β₁ (adam_beta1)'),
  adamBeta2: wide('adamBeta2', 'LAMB β₂ (adam_beta2)'),
  adamEpsilon: wide('adamEpsilon', 'LAMB ε (adam_epsilon)'),
  weightDecay: wide('weightDecay', 'LAMB weight decay (weight_decay)'),
  clampValue: wide('clampValue', 'LAMB’s clamp on each tensor’s weight norm (clamp_value)'),
  maxGradNorm: wide('maxGradNorm', 'global gradient-norm clip before each step (max_grad_norm)'),
} satisfies { [K in keyof RunSettings]-?: FlagRow };
const RUN_WIDE_FLAGS = tagged(RUN_SETTING_FLAGS, '[run-wide]');

/** How this machine computes: every training command's. */
export const COMPUTE_FLAGS = {
  batchSize: flagRow({ schema: int.min(1).max(4096), default: DEFAULT_LOCAL_TRAINER.batchSize, description: 'sequences per micro-batch (one forward and backward pass)' }),
  threads: flagRow({ schema: int.min(1).max(1024), description: 'onnxruntime threads (default: one per core)' }),
  precision: flagRow({ schema: z.enum(PRECISIONS), default: DEFAULT_LOCAL_TRAINER.precision, arg: '<name>', description: `compute precision ${PRECISION_NOTE}; a micro-batch whose fp16 gradients overflow is skipped` }),
};

/** This peer's own flags: they may differ between the peers of a run. */
const PEER_FLAGS = {
  join: flagRow({ schema: z.string(), arg: '<code>', description: 'join code of a running swarm (cohort:…)' }),
  runId: flagRow({ schema: z.string(), arg: '<id>', default: 'cohort-albert', description: 'the run to start or join (taken from --join when given); 1–64 of a-z 0-9 . _ -' }),
  listen: flagRow({ schema: z.string(), arg: '<addrs>', description: 'comma-separated multiaddrs to listen on (default /ip4/0.0.0.0/tcp/0)' }),
  ...SWARM_FLAGS,
  coordinator: flagRow({ schema: z.boolean(), description: 'compute nothing: bootstrap others, record every peer’s progress and metrics, credit contributions, checkpoint the model' }),
  ...COMPUTE_FLAGS,
  maxEpochs: flagRow({ schema: int.min(1), description: 'stop once the swarm reaches this epoch' }),
  matchmakingTime: flagRow({ schema: OPTION.matchmakingTime, arg: '<s>', description: 'seconds to form an averaging group (matchmaking_time)' }),
  averagingTimeout: flagRow({ schema: OPTION.averagingTimeout, arg: '<s>', description: 'seconds allowed for one gradient all-reduce (averaging_timeout)' }),
  averagingExpiration: flagRow({ schema: OPTION.averagingExpiration, arg: '<s>', description: 'lifetime of a group declaration in seconds (averaging_expiration; default max(matchmaking time, 15))' }),
  targetGroupSize: flagRow({ schema: OPTION.targetGroupSize, description: 'peers per averaging group; the group closes early once this many joined (target_group_size)' }),
  delayOptimizerStep: flagRow({ schema: OPTION.delayOptimizerStep, description: 'take the optimizer step during the next micro-batch, which is computed on the parameters before it (delay_optimizer_step; implied by --delay-grad-averaging)' }),
  delayGradAveraging: flagRow({ schema: OPTION.delayGradAveraging, description: 'average gradients in the background while computing the next micro-batches; the step lands when the round ends (delay_grad_averaging; implies --delay-optimizer-step)' }),
  displayName: flagRow({ schema: OPTION.displayName, arg: '<name>', description: 'name shown on the contribution leaderboard' }),
  uploadLimit: flagRow({ schema: int.min(1).max(10_485_760), arg: '<KiB/s>', description: 'cap on this peer’s averaging upload in KiB/s (also the bandwidth it declares); default: no cap' }),
  checkpointEvery: flagRow({ schema: int.min(0), default: 10, description: 'coordinator: checkpoint every N epochs (0: never)' }),
  keepCheckpoints: flagRow({ schema: int.min(1).max(1000), default: 3, description: 'coordinator: checkpoints kept' }),
  refresh: flagRow({ schema: OPTION.maxRefresh, default: 2, arg: '<s>', description: 'seconds between progress looks: coordinator polls; peers’ longest wait' }),
  dataSource: flagRow({ schema: z.string().min(1), arg: '<path|url>', description: 'founder: prepare this corpus (FILE, DIR, URL; .zip/.tar/.tar.gz/.gz read as they ship) and pin it in the run record; joiners fetch it from the swarm' }),
  tokenizer: flagRow({ schema: z.string().min(1), arg: '<file>', description: 'founder: the Hugging Face tokenizer.json of --data-source (default: a WordPiece tokenizer trained on it)' }),
  diskReserve: { ...DISK_RESERVE_FLAG, description: `founder: ${DISK_RESERVE_FLAG.description}` },
  cacheQuota: flagRow({ schema: positive, arg: '<MiB>', description: 'joiner: hold at most this much of the run’s shards (MiB, fractions allowed): a random subset that fits, swapping each shard trained on for another; default: all of them' }),
  out: flagRow({ schema: z.string(), arg: '<dir>', description: 'save the final model here (config.json + model.safetensors) when training ends' }),
  saveStateEvery: flagRow({ schema: int.min(0).max(10_080), default: DEFAULT_SAVE_STATE_MINUTES, arg: '<minutes>', description: 'training peer: save its full state (parameters, optimizer, epoch) in its data directory after an epoch ends once this many minutes of training passed since the last save, and on stop; a restart continues from it when the swarm is not ahead (0: after every epoch)' }),
  resumeFrom: flagRow({ schema: z.string(), arg: '<dir>', description: 'found the run from a state directory (config.json + model.safetensors, optionally optimizer.safetensors and cohort-state.json with its epoch) instead of new weights; a training peer founding the run only' }),
  throttle: flagRow({ schema: positive, arg: '<factor>', description: 'testing: run at 1/factor of this machine’s speed' }),
  simulatedCompute: flagRow({ schema: positive, arg: '<samples/s>', description: 'testing (the swarm lab): no forward/backward; each micro-batch takes batch size ÷ this many seconds and yields a random gradient of the model’s size, so many peers share a few cores while averaging real bytes' }),
  backupEverySteps: flagRow({ schema: OPTION.backupEverySteps, description: 'keep an in-memory copy of the state every N epochs; a step that leaves non-finite parameters restores it (backup_every_steps)' }),
  maxBadMicroBatches: flagRow({ schema: OPTION.maxBadMicroBatches, description: 'after N micro-batches in a row with a non-finite loss or gradient (each skipped) this peer leaves averaging until a finite one' }),
  faultInflateClaims: flagRow({ schema: FAULT.inflateClaims, arg: '<factor>', description: 'testing only: claim factor× the samples processed (contribution checks must catch it)' }),
  faultNonFiniteMicroBatches: flagRow({ schema: FAULT.nonFiniteMicroBatches, description: 'testing only: the gradients of the first N micro-batches hold a NaN (they must be skipped)' }),
  faultPauseStateSave: flagRow({ schema: int.min(1), description: 'testing only: the N-th full-state save of this peer stops for 60 s after its first chunk is written, logging it (a window to kill the peer mid-write)' }),
  ...METRICS_FLAGS,
};

/** Every flag of `cohort run` but the settings table's (`--initial-peers`, `--data-dir`, …). */
export const RUN_FLAGS = { ...PEER_FLAGS, ...RUN_WIDE_FLAGS };
export type RunFlags = FlagValues<typeof RUN_FLAGS>;

export interface RunSettingFlags {
  /** The flags' values (defaults where omitted). */
  readonly settings: RunSettings;
  /** Settings given on the command line, by a variable or in the config file. */
  readonly explicit: ReadonlyArray<keyof RunSettings>;
}

/**
 * The run settings among the parsed flags, and which of them the user gave; what the user left out is
 * the preset's default (`--preset large` runs hivemind's ALBERT recipe).
 */
export function runSettingFlags(cmd: Command, flags: RunFlags): RunSettingFlags {
  const explicit = givenFlags(cmd, RUN_SETTING_FLAGS);
  const given = Object.fromEntries(explicit.map((key) => [key, flags[key]]));
  return { settings: { ...defaultRunSettings(flags.preset), ...given }, explicit };
}

/** This peer's own flags that constrain which run settings it can train with. */
export interface LocalOptions {
  readonly delayGradAveraging: boolean;
  readonly delayOptimizerStep: boolean;
}

/**
 * Settings that tune one averaging mode, and the mode: every run record holds their defaults, so only
 * the flags given tell that a founder meant to tune a mode it did not choose.
 */
const MODE_TUNINGS = [
  { keys: ['powersgdRank', 'powersgdMinRatio'], mode: 'gradAverager', value: 'powersgd', name: 'PowerSGD' },
  { keys: ['innerSteps', 'outerLr', 'outerMomentum'], mode: 'outerOptimizer', value: 'diloco', name: 'DiLoCo' },
] as const;

/**
 * Combinations the settings (own or adopted) must satisfy with this peer's local flags; exits 2 naming
 * the flag. `explicit`: the settings a founder gave, none of which may tune a mode it did not choose
 * (nor choose PowerSGD for a run that all-reduces no gradient).
 */
export function checkRunSettings(s: RunSettings, local: LocalOptions, explicit: ReadonlyArray<keyof RunSettings> = []): void {
  const problem = runSettingsProblem(s);
  if (problem) throw new ConfigError(flagOf(RUN_SETTING_FLAGS, problem.field), problem.message);
  for (const { keys, mode, value, name } of MODE_TUNINGS) {
    const given = keys.find((k) => explicit.includes(k));
    if (given !== undefined && s[mode] !== value) throw new ConfigError(flagOf(RUN_SETTING_FLAGS, given), `${s[given]}: it tunes ${name} (it needs ${flagOf(RUN_SETTING_FLAGS, mode)} ${value}, not ${s[mode] ?? DEFAULT_RUN_SETTINGS[mode]})`);
  }
  if (explicit.includes('gradAverager') && s.gradAverager === 'powersgd' && s.useLocalUpdates) throw new ConfigError('--grad-averager', 'powersgd: it compresses the gradient all-reduce, which --use-local-updates turns off');
  if (local.delayGradAveraging && s.useLocalUpdates) throw new ConfigError('--delay-grad-averaging', 'needs gradient averaging, which --use-local-updates turns off');
  if ((local.delayGradAveraging || local.delayOptimizerStep) && s.outerOptimizer === 'diloco') throw new ConfigError(local.delayGradAveraging ? '--delay-grad-averaging' : '--delay-optimizer-step', 'is not supported with --outer-optimizer diloco');
  if (local.delayOptimizerStep && s.useLocalUpdates) throw new ConfigError('--delay-optimizer-step', 'is not supported with --use-local-updates (the local step runs on every micro-batch)');
}

/** Checks `--data-source`/`--tokenizer` before anything starts (exit 2 naming the flag). */
export function checkFoundingDataFlags(founding: boolean, source: string | undefined, tokenizer: string | undefined, diskReserve: number | undefined): void {
  if (!founding && source !== undefined) throw new ConfigError('--data-source', 'founds a run on a dataset; a joiner gets the run’s data from the swarm (omit it)');
  if (tokenizer !== undefined && source === undefined) throw new ConfigError('--tokenizer', 'is the tokenizer of --data-source; give both');
  if (diskReserve !== undefined && source === undefined) throw new ConfigError('--disk-reserve', 'is what the download of --data-source leaves free; give both');
  if (tokenizer !== undefined && !fs.existsSync(tokenizer)) throw new ConfigError('--tokenizer', `invalid value "${tokenizer}"; accepted: an existing tokenizer.json file`);
}
