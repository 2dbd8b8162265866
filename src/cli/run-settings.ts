/**
 * `cohort run`'s run parameters: the flags that must match across a swarm, which of them the user
 * gave explicitly (a joiner's explicit flag that contradicts the swarm exits 2), and the combinations
 * they must satisfy with this peer's own flags.
 */
import type { Command } from 'commander';
import { AGGREGATIONS, COMPRESSIONS } from '../averaging/index.js';
import { DEFAULT_RUN_SETTINGS, defaultRunSettings, runSettingsProblem, type RunSettings } from '../collab/index.js';
import { ConfigError } from '../config/load.js';
import { PRESET_NAMES, PRESETS, type PresetName } from '../engine/index.js';
import { choiceFlag, intFlag, positiveFloatFlag } from './flags.js';

/** Each run setting's flag and commander attribute. */
export const RUN_SETTING_FLAGS: { readonly [K in keyof RunSettings]-?: { readonly flag: string; readonly option: string } } = {
  preset: { flag: '--preset', option: 'preset' },
  seqLen: { flag: '--seq-len', option: 'seqLen' },
  targetBatchSize: { flag: '--target-batch-size', option: 'targetBatchSize' },
  seed: { flag: '--seed', option: 'seed' },
  peakLr: { flag: '--lr', option: 'lr' },
  warmupSteps: { flag: '--warmup-steps', option: 'warmupSteps' },
  totalSteps: { flag: '--total-steps', option: 'totalSteps' },
  gradCompression: { flag: '--grad-compression', option: 'gradCompression' },
  stateAveragingCompression: { flag: '--state-averaging-compression', option: 'stateAveragingCompression' },
  averageStateEvery: { flag: '--average-state-every', option: 'averageStateEvery' },
  averageOptStatistics: { flag: '--average-opt-statistics', option: 'averageOptStatistics' },
  useLocalUpdates: { flag: '--use-local-updates', option: 'useLocalUpdates' },
  batchSizeLead: { flag: '--batch-size-lead', option: 'batchSizeLead' },
  aggregation: { flag: '--aggregation', option: 'aggregation' },
  adamBeta1: { flag: '--adam-beta1', option: 'adamBeta1' },
  adamBeta2: { flag: '--adam-beta2', option: 'adamBeta2' },
  adamEpsilon: { flag: '--adam-epsilon', option: 'adamEpsilon' },
  weightDecay: { flag: '--weight-decay', option: 'weightDecay' },
  clampValue: { flag: '--clamp-value', option: 'clampValue' },
  maxGradNorm: { flag: '--max-grad-norm', option: 'maxGradNorm' },
};

export interface RunSettingFlags {
  /** The flags' values (defaults where omitted). */
  readonly settings: RunSettings;
  /** Settings given on the command line. */
  readonly explicit: ReadonlyArray<keyof RunSettings>;
}

type Raw = Record<string, string | boolean | undefined>;

/** Parses the run-setting flags (a number's range and combinations are checked by `checkRunSettings`); omitted ones take the preset's defaults. */
export function runSettingFlags(cmd: Command, opts: Raw): RunSettingFlags {
  const str = (key: keyof RunSettings): string | undefined => opts[RUN_SETTING_FLAGS[key].option] as string | undefined;
  const preset = choiceFlag<PresetName>('--preset', str('preset'), PRESET_NAMES) ?? DEFAULT_RUN_SETTINGS.preset;
  const maxSeq = Math.max(...PRESET_NAMES.map((p) => PRESETS[p].maxPositionEmbeddings));
  const averageStateEvery = intFlag('--average-state-every', str('averageStateEvery'), 1);
  const settings: RunSettings = {
    preset,
    seqLen: intFlag('--seq-len', str('seqLen'), 5, maxSeq) ?? Math.min(DEFAULT_RUN_SETTINGS.seqLen, PRESETS[preset].maxPositionEmbeddings),
    targetBatchSize: intFlag('--target-batch-size', str('targetBatchSize'), 1, 10_000_000)!,
    seed: intFlag('--seed', str('seed'), 0, 2 ** 32 - 1)!,
    peakLr: positiveFloatFlag('--lr', str('peakLr'))!,
    warmupSteps: intFlag('--warmup-steps', str('warmupSteps'), 0)!,
    totalSteps: intFlag('--total-steps', str('totalSteps'), 1)!,
    gradCompression: choiceFlag('--grad-compression', str('gradCompression'), COMPRESSIONS)!,
    stateAveragingCompression: choiceFlag('--state-averaging-compression', str('stateAveragingCompression'), COMPRESSIONS)!,
    ...(averageStateEvery !== undefined ? { averageStateEvery } : {}),
    averageOptStatistics: opts['averageOptStatistics'] === true,
    useLocalUpdates: opts['useLocalUpdates'] === true,
    batchSizeLead: intFlag('--batch-size-lead', str('batchSizeLead'), 0, 10_000_000)!,
    aggregation: choiceFlag('--aggregation', str('aggregation'), AGGREGATIONS)!,
    adamBeta1: positiveFloatFlag('--adam-beta1', str('adamBeta1')) ?? DEFAULT_RUN_SETTINGS.adamBeta1,
    adamBeta2: positiveFloatFlag('--adam-beta2', str('adamBeta2')) ?? DEFAULT_RUN_SETTINGS.adamBeta2,
    adamEpsilon: positiveFloatFlag('--adam-epsilon', str('adamEpsilon')) ?? DEFAULT_RUN_SETTINGS.adamEpsilon,
    // weight decay 0 (none) is a valid recipe, which positiveFloatFlag refuses
    weightDecay: str('weightDecay')?.trim() === '0' ? 0 : (positiveFloatFlag('--weight-decay', str('weightDecay')) ?? DEFAULT_RUN_SETTINGS.weightDecay),
    clampValue: positiveFloatFlag('--clamp-value', str('clampValue')) ?? DEFAULT_RUN_SETTINGS.clampValue,
    maxGradNorm: positiveFloatFlag('--max-grad-norm', str('maxGradNorm')) ?? DEFAULT_RUN_SETTINGS.maxGradNorm,
  };
  const explicit = (Object.keys(RUN_SETTING_FLAGS) as Array<keyof RunSettings>).filter((key) => {
    const source = cmd.getOptionValueSource(RUN_SETTING_FLAGS[key].option);
    return source !== undefined && source !== 'default';
  });
  // what the user left out is the preset's default (`--preset large` runs hivemind's ALBERT recipe)
  const defaults = defaultRunSettings(preset);
  const omitted = Object.fromEntries((Object.keys(RUN_SETTING_FLAGS) as Array<keyof RunSettings>).filter((k) => !explicit.includes(k) && defaults[k] !== undefined).map((k) => [k, defaults[k]]));
  return { settings: { ...settings, ...omitted }, explicit };
}

/** This peer's own flags that constrain which run settings it can train with. */
export interface LocalOptions {
  readonly delayGradAveraging: boolean;
  readonly delayOptimizerStep: boolean;
}

/** Combinations the settings (own or adopted) must satisfy with this peer's local flags; exits 2 naming the flag. */
export function checkRunSettings(s: RunSettings, local: LocalOptions): void {
  const problem = runSettingsProblem(s);
  if (problem) throw new ConfigError(RUN_SETTING_FLAGS[problem.field].flag, problem.message);
  if (local.delayGradAveraging && s.useLocalUpdates) throw new ConfigError('--delay-grad-averaging', 'needs gradient averaging, which --use-local-updates turns off');
  if (local.delayOptimizerStep && s.useLocalUpdates) throw new ConfigError('--delay-optimizer-step', 'is not supported with --use-local-updates (the local step runs on every micro-batch)');
}
