/**
 * `cohort run`'s run parameters: the flags that must match across a swarm, which of them the user
 * gave explicitly, and a joiner's adoption of the swarm's published values (an explicit flag that
 * contradicts the swarm exits 2).
 */
import type { Command } from 'commander';
import { COMPRESSIONS } from '../averaging/index.js';
import { describeRunSettings, publishRunParams, readRunParams, runSettingsOf, runSettingsProblem, joinPeerIds, type RunSettings } from '../collab/run-params.js';
import { ConfigError } from '../config/load.js';
import { PRESET_NAMES, PRESETS, type PresetName } from '../engine/albert/config.js';
import type { Logger } from '../log/logger.js';
import type { SwarmNode } from '../swarm/index.js';
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
};

export interface RunSettingFlags {
  /** The flags' values (defaults where omitted). */
  readonly settings: RunSettings;
  /** Settings given on the command line. */
  readonly explicit: ReadonlyArray<keyof RunSettings>;
}

type Raw = Record<string, string | boolean | undefined>;

/** Parses the run-setting flags (each value's own range; combinations are checked by `checkRunSettings`). */
export function runSettingFlags(cmd: Command, opts: Raw): RunSettingFlags {
  const str = (key: keyof RunSettings): string | undefined => opts[RUN_SETTING_FLAGS[key].option] as string | undefined;
  const preset = choiceFlag<PresetName>('--preset', str('preset'), PRESET_NAMES) ?? 'tiny';
  const maxSeq = Math.max(...PRESET_NAMES.map((p) => PRESETS[p].maxPositionEmbeddings));
  const averageStateEvery = intFlag('--average-state-every', str('averageStateEvery'), 1);
  const settings: RunSettings = {
    preset,
    seqLen: intFlag('--seq-len', str('seqLen'), 5, maxSeq) ?? Math.min(128, PRESETS[preset].maxPositionEmbeddings),
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
  };
  const explicit = (Object.keys(RUN_SETTING_FLAGS) as Array<keyof RunSettings>).filter((key) => {
    const source = cmd.getOptionValueSource(RUN_SETTING_FLAGS[key].option);
    return source !== undefined && source !== 'default';
  });
  return { settings, explicit };
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

/**
 * A joiner's settings: the swarm's published ones (an explicit flag that differs exits 2; the rest
 * are adopted, logged once, and re-published by this peer), or its own flags, with a warning, when
 * no record is found in time.
 */
export async function adoptRunSettings(
  node: SwarmNode,
  initialPeers: string | readonly string[],
  flags: RunSettingFlags,
  local: LocalOptions,
  log: Logger,
  signal?: AbortSignal,
): Promise<RunSettings> {
  const swarm = await readRunParams(node, { joinPeers: joinPeerIds(initialPeers), log, ...(signal ? { signal } : {}) });
  if (swarm === undefined) {
    log.warn(`no run parameters published in swarm "${node.runId}" (a founder running an older Cohort?): training with this peer's own flags (${describeRunSettings(flags.settings)}); every peer must pass the same ones`);
    checkRunSettings(flags.settings, local);
    return flags.settings;
  }
  const theirs = runSettingsOf(swarm.params);
  for (const key of flags.explicit) {
    if (flags.settings[key] !== theirs[key]) {
      throw new ConfigError(RUN_SETTING_FLAGS[key].flag, `${show(flags.settings[key])} contradicts the swarm's ${show(theirs[key])} (published by ${swarm.owner}); omit it to adopt the swarm's`);
    }
  }
  checkRunSettings(theirs, local);
  log.info(`adopting the swarm's run parameters (published by ${swarm.owner}): ${describeRunSettings(theirs)}`);
  // re-published by every peer that trains with them, so the record outlives the founder
  publishRunParams(node, swarm.params, log).catch((err: unknown) => log.warn(`could not re-publish the run parameters: ${(err as Error).message}`));
  return theirs;
}

function show(value: RunSettings[keyof RunSettings]): string {
  return value === undefined ? 'default' : typeof value === 'boolean' ? (value ? 'on' : 'off') : String(value);
}
