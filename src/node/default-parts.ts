import type { Config } from '../config/settings.js';
import { LocalTrainingRuntime } from './local-training.js';
import type { MakeRuntimeParts } from './node-runtime.js';

/** The runtime parts both hosts (headless CLI, desktop utility process) attach for the given settings. */
export function defaultParts(config: Pick<Config, 'dataDir' | 'training'>): MakeRuntimeParts {
  return ({ log, store }) => (config.training === 'local' ? { training: new LocalTrainingRuntime({ store, log, dataDir: config.dataDir }) } : {});
}
