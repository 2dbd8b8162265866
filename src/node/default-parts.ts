import { CollaborativeCoordinatorRole, CollaborativeRuntime, SharedSwarm } from '../collab/runtime.js';
import type { Config } from '../config/settings.js';
import type { MakeRuntimeParts } from './node-runtime.js';

/**
 * The runtime parts both hosts (headless CLI, desktop utility process) attach for the given settings:
 * collaborative training (it trains alone when no join code is set or the swarm cannot be reached)
 * and the coordinator role, sharing one swarm node.
 */
export function defaultParts(config: Pick<Config, 'dataDir' | 'training'>): MakeRuntimeParts {
  return ({ log, store }) => {
    if (config.training !== 'local') return {};
    const options = { store, log, dataDir: config.dataDir };
    const swarm = new SharedSwarm(options);
    const training = new CollaborativeRuntime(options, swarm);
    return { training, coordinator: new CollaborativeCoordinatorRole(options, swarm, () => training.joinCode), swarm };
  };
}
