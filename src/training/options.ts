/**
 * What a training loop needs to know, solo or with a swarm: the run's model, data shape and schedule
 * (a swarm's published run settings; alone, the same defaults a founder publishes) and this node's
 * own choices. One set of defaults, so Start alone and Start with a swarm train the same way.
 */
import { COLLABORATIVE_OPTION_FIELDS } from '../collab/options.js';
import { DEFAULT_RUN_SETTINGS, type RunSettings } from '../collab/run-settings.js';
import type { Precision } from '../engine/index.js';
import { DEFAULT_SETTINGS } from '../shared/settings-schema.js';
import { pick } from '../util/pick.js';

/** The run settings a training loop reads (the rest are the collaborative optimizer's). */
const TRAINER_RUN_KEYS = ['preset', 'seqLen', 'seed', 'peakLr', 'warmupSteps', 'totalSteps', 'adamBeta1', 'adamBeta2', 'adamEpsilon', 'weightDecay', 'clampValue', 'maxGradNorm'] as const;

export interface TrainerSettings extends Pick<RunSettings, (typeof TRAINER_RUN_KEYS)[number]> {
  /** Micro-batch size (samples per forward/backward); smaller when the memory limit needs it. */
  readonly batchSize: number;
  /** fp32, or fp16 with dynamic loss scaling (an overflowing micro-batch contributes nothing). */
  readonly precision: Precision;
  /** Solo: optimizer steps between checkpoints, and how many of each kind the store keeps. */
  readonly checkpointEvery: number;
  readonly keepCheckpoints: number;
  /** The memory limit when the volunteer's settings give none. */
  readonly maxMemoryMiB: number;
  /** Alone: steps in a row with a non-finite loss or gradient (each skipped) before training stops. */
  readonly maxBadSteps: number;
}

/** This node's own choices, which may differ between the peers of a run. */
export type LocalTrainerSettings = Omit<TrainerSettings, keyof RunSettings>;

export const DEFAULT_LOCAL_TRAINER: LocalTrainerSettings = {
  batchSize: 4,
  precision: 'fp32',
  checkpointEvery: 50,
  keepCheckpoints: 3,
  maxMemoryMiB: DEFAULT_SETTINGS.policies.maxMemoryMiB,
  // as many as a swarm peer tolerates before it leaves averaging
  maxBadSteps: COLLABORATIVE_OPTION_FIELDS.maxBadMicroBatches.parse(undefined),
};

/** The trainer for `run` (default: the settings a founder publishes) with this node's choices over the defaults. */
export function trainerSettings(run: RunSettings = DEFAULT_RUN_SETTINGS, local: Partial<LocalTrainerSettings> = {}): TrainerSettings {
  return { ...DEFAULT_LOCAL_TRAINER, ...definedOnly(local), ...pick(run, TRAINER_RUN_KEYS) };
}

/** Where a training session gets its batches (training/data.ts): auto is the prepared dataset if there is one, else synthetic tokens. */
export const DATA_CHOICES = ['auto', 'prepared', 'synthetic'] as const;
export type DataChoice = (typeof DATA_CHOICES)[number];

/** Minutes of training between two saves of a swarm peer's full state (training/swarm-peer.ts). */
export const DEFAULT_SAVE_STATE_MINUTES = 5;

/** Leaves out keys whose value is undefined, so they take the default. */
function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
