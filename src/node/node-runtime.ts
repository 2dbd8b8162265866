import type { Logger } from '../log/logger.js';
import type { Store } from '../store/index.js';
import { COMPONENTS } from './components.js';
import { NodeController } from './controller.js';
import { LogRing } from './log-ring.js';
import { teeLogger } from './log-tee.js';
import type { CoordinatorRole, SwarmPresence, TrainingRuntime } from './runtime-parts.js';

/** The runtime parts that exist in this build (none yet; the collaborative-training work passes them). */
export interface RuntimeParts {
  readonly training?: TrainingRuntime;
  readonly coordinator?: CoordinatorRole;
  readonly swarm?: SwarmPresence;
}

/** Makes the runtime parts with the node's store and logger (whose lines also reach the dashboard's log panel). */
export type MakeRuntimeParts = (context: { readonly log: Logger; readonly store: Store }) => RuntimeParts;

/**
 * The node runtime both hosts run (the headless CLI and the desktop app's utility process): one log
 * for stderr and the dashboard, the parts this build has, and the controller over them.
 */
export function createNodeController(init: { store: Store; log: Logger; version: string; parts?: MakeRuntimeParts }): NodeController {
  const logs = new LogRing();
  const log = teeLogger(init.log, logs);
  for (const c of COMPONENTS.filter((c) => !c.available)) log.warn(`${c.name}: ${c.detail}`);
  return new NodeController({ store: init.store, log, logs, version: init.version, components: COMPONENTS, ...init.parts?.({ log, store: init.store }) });
}
